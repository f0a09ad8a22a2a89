//! No module of a crate imports, through others, from itself: the modules of each workspace
//! crate (and of the binary) are read from their sources, an edge drawn for every `crate::`,
//! `super::` and `self::` path to another module, and a cycle among them fails.
//!
//! `cargo-modules` would do this from the compiler's view, but building it takes longer than
//! the whole test suite. This reads paths as written, which is what the rule is about: a
//! module and the modules inside it are one unit from outside (a path from `a::x` to `b::y` is
//! an edge from `a` to `b`; a child naming its parent or a parent its child is none),
//! `#[cfg(test)]` modules are left out (fixtures build from the whole crate), and a name
//! reached through a `pub use` (`crate::Snapshot`) counts for the module it comes from.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

type Module = Vec<String>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module a file under `src` defines: `a/b.rs` and `a/b/mod.rs` are `a::b`.
fn module_of(src: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Module = rel
        .iter()
        .map(|s| s.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    let last = parts.last().map(String::as_str);
    if matches!(last, Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// The file's text without comments and without `#[cfg(test)]` items.
fn code(text: &str) -> (String, BTreeSet<String>) {
    let mut out = String::new();
    let mut test_mods = BTreeSet::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if t.starts_with("//") {
            continue;
        }
        if t.starts_with("#[cfg(test)]") {
            // the item after it: a `mod x;` (a file left out) or a block skipped to its end
            let Some(item) = lines.by_ref().find(|l| !l.trim_start().starts_with("#[")) else {
                break;
            };
            let it = item.trim_start();
            if let Some(name) = it.strip_prefix("mod ").and_then(|m| m.strip_suffix(';')) {
                test_mods.insert(name.trim().to_owned());
                continue;
            }
            if item.trim_end().ends_with('{') {
                let indent = item.len() - it.len();
                let close = format!("{}}}", " ".repeat(indent));
                lines.by_ref().find(|l| l.trim_end() == close);
            }
            continue;
        }
        let line = line.split(" // ").next().unwrap_or(line);
        out.push_str(line);
        out.push('\n');
    }
    (out, test_mods)
}

/// Every path in `code` that starts with `crate`, `super` or `self`, as its segments (a
/// `{a::b, c}` group gives one path per member).
fn paths(code: &str) -> Vec<(String, Vec<String>)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        if !ident(b[i]) || (i > 0 && (ident(b[i - 1]) || b[i - 1] == b':')) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && ident(b[i]) {
            i += 1;
        }
        let head = &code[start..i];
        if matches!(head, "crate" | "super" | "self") && code[i..].starts_with("::") {
            let mut segs = Vec::new();
            let end = tail(code, i, &mut segs, &mut out, head);
            out.push((head.to_owned(), segs));
            i = end;
        }
    }
    out
}

/// Reads `::a::b...` from `at`; a `{...}` group adds its members to `out` with the segments
/// so far as prefix. Returns where it stopped.
fn tail(
    code: &str,
    mut at: usize,
    segs: &mut Vec<String>,
    out: &mut Vec<(String, Vec<String>)>,
    head: &str,
) -> usize {
    let b = code.as_bytes();
    while code[at..].starts_with("::") {
        at += 2;
        if b.get(at) == Some(&b'{') {
            let mut depth = 0;
            let mut member = String::new();
            for (k, c) in code[at..].char_indices() {
                match c {
                    '{' => {
                        depth += 1;
                        if depth == 1 {
                            continue;
                        }
                    }
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            group_member(&member, segs, out, head);
                            return at + k + 1;
                        }
                    }
                    ',' if depth == 1 => {
                        group_member(&member, segs, out, head);
                        member.clear();
                        continue;
                    }
                    _ => {}
                }
                member.push(c);
            }
            return code.len();
        }
        let s = at;
        while at < b.len() && (b[at].is_ascii_alphanumeric() || b[at] == b'_') {
            at += 1;
        }
        if s == at {
            break;
        }
        segs.push(code[s..at].to_owned());
    }
    at
}

fn group_member(member: &str, prefix: &[String], out: &mut Vec<(String, Vec<String>)>, head: &str) {
    let first: Vec<String> = member
        .split("::")
        .map(|s| {
            s.trim()
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .next()
                .unwrap_or("")
                .to_owned()
        })
        .take_while(|s| !s.is_empty() && s != "{")
        .collect();
    let mut segs = prefix.to_vec();
    segs.extend(first);
    out.push((head.to_owned(), segs));
}

/// The module a path written in `m` leads to: its longest prefix that is a module, or the
/// module a name it ends in is re-exported from.
fn resolve(
    known: &BTreeSet<Module>,
    reexported: &BTreeMap<(Module, String), Module>,
    m: &Module,
    head: &str,
    segs: &[String],
) -> Module {
    let mut base: Module = match head {
        "crate" => Vec::new(),
        "self" => m.clone(),
        _ => m[..m.len().saturating_sub(1)].to_vec(),
    };
    let mut target = base.clone();
    for s in segs {
        if s == "super" {
            base.pop();
            target.clone_from(&base);
            continue;
        }
        base.push(s.clone());
        if known.contains(&base) {
            target.clone_from(&base);
        } else {
            if let Some(from) = reexported.get(&(target.clone(), s.clone())) {
                target.clone_from(from);
            }
            break;
        }
    }
    target
}

/// The `pub use` (any visibility) items of a file: each name's path, and the name it is
/// exported as.
fn reexports(code: &str) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    for stmt in code.split(';') {
        let s = stmt.trim_start();
        let Some(rest) = s.strip_prefix("pub") else {
            continue;
        };
        let rest = rest.trim_start();
        let rest = if rest.starts_with('(') {
            rest.split_once(')').map_or("", |(_, r)| r).trim_start()
        } else {
            rest
        };
        if let Some(tree) = rest.strip_prefix("use ") {
            flatten(&mut Vec::new(), tree.trim(), &mut out);
        }
    }
    out
}

/// One use tree (`a::b::{c, d as e}`) as (path, exported name) pairs; globs are left out.
fn flatten(prefix: &mut Vec<String>, tree: &str, out: &mut Vec<(Vec<String>, String)>) {
    if let Some(open) = tree.find('{') {
        let at = prefix.len();
        prefix.extend(
            tree[..open]
                .split("::")
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        );
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let (mut depth, mut from) = (0, 0);
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    flatten(prefix, inner[from..i].trim(), out);
                    from = i + 1;
                }
                _ => {}
            }
        }
        flatten(prefix, inner[from..].trim(), out);
        prefix.truncate(at);
        return;
    }
    let (path, alias) = match tree.split_once(" as ") {
        Some((p, a)) => (p.trim(), Some(a.trim())),
        None => (tree, None),
    };
    let mut segs: Vec<String> = prefix.clone();
    segs.extend(
        path.split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
    );
    let Some(last) = segs.last().cloned() else {
        return;
    };
    if last == "*" || segs.len() < 2 {
        return;
    }
    let name = alias.map_or(last, str::to_owned);
    out.push((segs, name));
}

/// The cycles among a crate's modules: each strongly connected set of more than one module.
fn cycles(src: &Path) -> (Vec<Vec<String>>, BTreeMap<Module, BTreeSet<Module>>) {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut texts = BTreeMap::new();
    let mut left_out = BTreeSet::new();
    for f in &files {
        let m = module_of(src, f);
        let (c, test_mods) = code(&fs::read_to_string(f).unwrap());
        for t in test_mods {
            let mut tm = m.clone();
            tm.push(t);
            left_out.insert(tm);
        }
        texts.insert(m, c);
    }
    let known: BTreeSet<Module> = texts
        .keys()
        .filter(|m| !left_out.iter().any(|t| m.starts_with(t)))
        .cloned()
        .collect();
    // `pub use` names: (module, name) -> the module the name comes from
    let mut reexported: BTreeMap<(Module, String), Module> = BTreeMap::new();
    for _ in 0..4 {
        for (m, c) in &texts {
            for (mut segs, name) in reexports(c) {
                let head = segs.remove(0);
                let head = if matches!(head.as_str(), "crate" | "super" | "self") {
                    head
                } else {
                    let mut child = m.clone();
                    child.push(head.clone());
                    if !known.contains(&child) {
                        continue; // another crate's
                    }
                    segs.insert(0, head);
                    "self".to_owned()
                };
                let from = resolve(&known, &reexported, m, &head, &segs);
                reexported.insert((m.clone(), name), from);
            }
        }
    }
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (m, c) in &texts {
        if !known.contains(m) {
            continue;
        }
        for (head, segs) in paths(c) {
            let target = resolve(&known, &reexported, m, &head, &segs);
            if target.starts_with(m) || m.starts_with(&target) {
                continue;
            }
            // between the two modules' ancestors that are siblings
            let k = m.iter().zip(&target).take_while(|(a, b)| a == b).count();
            edges
                .entry(m[..=k].to_vec())
                .or_default()
                .insert(target[..=k].to_vec());
        }
    }
    (scc(&known, &edges), edges)
}

/// Tarjan's strongly connected components of more than one module, as `a::b` names.
fn scc(nodes: &BTreeSet<Module>, edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<String>> {
    struct S<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, (usize, usize)>,
        stack: Vec<&'a Module>,
        on: BTreeSet<&'a Module>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut S<'a>, v: &'a Module) {
        let n = s.index.len();
        s.index.insert(v, (n, n));
        s.stack.push(v);
        s.on.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.index[w].1.min(s.index[v].1);
                s.index.get_mut(v).unwrap().1 = low;
            } else if s.on.contains(w) {
                let low = s.index[w].0.min(s.index[v].1);
                s.index.get_mut(v).unwrap().1 = low;
            }
        }
        if s.index[v].0 == s.index[v].1 {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(w.join("::"));
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = S {
        edges,
        index: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in nodes {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn no_module_import_cycles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut crates: Vec<(String, PathBuf)> = vec![("tcmon".into(), root.join("src"))];
    for e in fs::read_dir(root.join("crates")).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        crates.push((name, e.path().join("src")));
    }
    crates.sort();
    let mut failed = Vec::new();
    for (name, src) in &crates {
        let (found, _) = cycles(src);
        for c in &found {
            eprintln!("{name}: modules in a cycle: {}", c.join(", "));
        }
        if !found.is_empty() {
            failed.push(name.clone());
        }
    }
    assert!(failed.is_empty(), "module cycles in {failed:?}");
}

#[test]
fn a_cycle_through_a_group_import_is_found() {
    let dir = std::env::temp_dir().join(format!("tcmon-cycles-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("b")).unwrap();
    fs::write(
        dir.join("lib.rs"),
        "mod a;\nmod b;\nmod c;\nmod d;\nmod e;\npub use d::{D, inner::{E as F}};\n",
    )
    .unwrap();
    // d and e only meet through the root's re-export of d's name
    fs::write(dir.join("d.rs"), "pub struct D;\nuse crate::e::X;\n").unwrap();
    fs::write(dir.join("e.rs"), "pub struct X;\nfn f(_: crate::D) {}\n").unwrap();
    fs::write(dir.join("a.rs"), "use crate::{b::x::Y, c};\n").unwrap();
    fs::write(
        dir.join("b/mod.rs"),
        "mod x;\nuse super::a::Z; // crate::c\n",
    )
    .unwrap();
    fs::write(dir.join("b/x.rs"), "use super::super::c::W;\n").unwrap();
    fs::write(
        dir.join("c.rs"),
        "pub struct W;\n#[cfg(test)]\nmod tests {\n    use crate::a::Z;\n}\n",
    )
    .unwrap();
    let (found, edges) = cycles(&dir);
    fs::remove_dir_all(&dir).unwrap();
    let m = |s: &str| s.split("::").map(str::to_owned).collect::<Module>();
    let names = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert_eq!(found, vec![names(&["a", "b"]), names(&["d", "e"])]);
    assert!(edges[&m("b")].contains(&m("c")), "b::x's import is b's");
    assert!(
        !edges.contains_key(&m("c")),
        "a test module's import is no edge"
    );
}
