#!/usr/bin/env bash
# Every relative link in the Markdown docs (README.md, CHANGELOG.md, docs/, benches/README.md,
# packaging/README.md) resolves to a file in the repository, and its #anchor, if any, to a
# heading of that file; no link leaves the repository. Prints each broken link as
# FILE: TARGET (why) and exits 1 if there is one. Also checks that the README's test command
# is the one `.ci/run` ends with, so the two cannot drift apart.
#
# Usage: docs/check-links.sh [FILE.md...]     (default: the files above)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  mapfile -t files < <(ls README.md CHANGELOG.md benches/README.md packaging/README.md 2>/dev/null
    find docs -name '*.md' | sort)
fi

# GitHub's anchor of each heading of a file: lowercase, punctuation dropped, spaces to hyphens
anchors() {
  sed -n 's/^#\{1,6\} \{1,\}//p' "$1" | tr '[:upper:]' '[:lower:]' |
    sed 's/[^a-z0-9 _-]//g; s/ /-/g'
}

bad=0
for f in "${files[@]}"; do
  dir=$(dirname "$f")
  # [text](target) outside code spans and fenced blocks
  links=$(awk '/^```/ {fence = !fence; next} !fence' "$f" | sed 's/`[^`]*`//g' |
    grep -o '\]([^)]*)' | sed 's/^](//; s/)$//; s/ .*//' || true)
  for link in $links; do
    case $link in
      http://* | https://* | mailto:*) continue ;;
    esac
    path=${link%%#*}
    anchor=
    [[ $link == *#* ]] && anchor=${link#*#}
    if [ -z "$path" ]; then
      target=$f
    else
      target=$dir/$path
    fi
    resolved=$(realpath -m "$target")
    if [[ $resolved != "$root"/* ]]; then
      echo "$f: $link (outside the repository)"
      bad=1
      continue
    fi
    if [ ! -e "$target" ]; then
      echo "$f: $link (no such file)"
      bad=1
      continue
    fi
    if [ -n "$anchor" ] && [ -f "$target" ] && ! anchors "$target" | grep -qx -- "$anchor"; then
      echo "$f: $link (no heading #$anchor in $target)"
      bad=1
    fi
  done
done

ci=$(grep -v '^\s*$' .ci/run | tail -1)
if ! grep -q "^$ci  *#" README.md; then
  echo "README.md: its test command is not .ci/run's last line ($ci)"
  bad=1
fi
exit $bad
