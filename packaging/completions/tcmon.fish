# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_tcmon_global_optspecs
    string join \n dev= netns= config= no-bpf v/verbose interval= replay= at= h/help V/version
end

function __fish_tcmon_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_tcmon_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_tcmon_using_subcommand
    set -l cmd (__fish_tcmon_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c tcmon -n "__fish_tcmon_needs_command" -l dev -d 'Only this interface (repeatable; classify: the one the packet takes). Default: all' -r -f -a "(__fish_print_interfaces)"
complete -c tcmon -n "__fish_tcmon_needs_command" -l netns -d 'Read the named network namespace (/run/netns/NAME) instead of the current one' -r
complete -c tcmon -n "__fish_tcmon_needs_command" -l config -d 'Config file (default: none; see config.toml for every key and its default)' -r -F
complete -c tcmon -n "__fish_tcmon_needs_command" -l interval -d 'The terminal UI\'s: poll this often (e.g. 500ms, 2s; at least 100ms). Default: `[agent] interval`, 1s' -r
complete -c tcmon -n "__fish_tcmon_needs_command" -l replay -d 'The terminal UI over a recording (the flight recorder\'s directory) instead of the kernel: the same screens at a recorded second, moved with [ ] { } n N' -r -f -a "(__fish_complete_directories)"
complete -c tcmon -n "__fish_tcmon_needs_command" -l at -d 'With --replay: the second to start at (`2026-12-07 03:12:05` UTC, `3h ago`); default: the last recorded' -r
complete -c tcmon -n "__fish_tcmon_needs_command" -l no-bpf -d 'Do not measure the queueing delay of real packets with eBPF (`[sojourn] enabled`)'
complete -c tcmon -n "__fish_tcmon_needs_command" -s v -l verbose -d 'More detail (check: every object of a finding and every command of its fix, not the worst three and the first three)'
complete -c tcmon -n "__fish_tcmon_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tcmon -n "__fish_tcmon_needs_command" -s V -l version -d 'Print version'
complete -c tcmon -n "__fish_tcmon_needs_command" -f -a "dump" -d 'Read every qdisc, class and filter once (or sample rates) and print them'
complete -c tcmon -n "__fish_tcmon_needs_command" -f -a "check" -d 'Diagnose the shaper: findings with evidence and fixes; exit 0 ok, 1 warning, 2 critical, 3 unknown'
complete -c tcmon -n "__fish_tcmon_needs_command" -f -a "probe" -d 'Measure latency under load (idle, download, upload, both, idle), grade it and name the queue that holds the delay'
complete -c tcmon -n "__fish_tcmon_needs_command" -f -a "classify" -d 'Which class does a packet land in? Walks the filters as the kernel does and prints the path'
complete -c tcmon -n "__fish_tcmon_needs_command" -f -a "sink" -d 'Serve the other end of `probe --load`: TCP upload/download streams and UDP echo'
complete -c tcmon -n "__fish_tcmon_needs_command" -f -a "serve" -d 'Poll on an interval and serve Prometheus/OpenMetrics metrics, the snapshot and the findings over HTTP'
complete -c tcmon -n "__fish_tcmon_needs_command" -f -a "record" -d 'Poll on an interval and record every poll to disk (the flight recorder), within a byte budget, for `dump --replay` and `check --replay`. `serve` records too when `[record] dir` is set'
complete -c tcmon -n "__fish_tcmon_needs_command" -f -a "replay" -d 'What stood out in a recording: the intervals when a queue held a backlog worth a wait (`[check] queue_delay_warning_ms`), dropped packets or delayed measured packets, worst first'
complete -c tcmon -n "__fish_tcmon_needs_command" -f -a "lab" -d 'Build a lab (node1 - router - node2, a shaper on the router) in network namespaces, to see tcmon on a real shaper. Needs root'
complete -c tcmon -n "__fish_tcmon_needs_command" -f -a "completions" -d 'Print shell completions: `tcmon completions bash > /etc/bash_completion.d/tcmon` (the Debian package installs them for bash, zsh and fish)'
complete -c tcmon -n "__fish_tcmon_needs_command" -f -a "man" -d 'Write the man pages (tcmon.1 and one per command) into a directory'
complete -c tcmon -n "__fish_tcmon_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c tcmon -n "__fish_tcmon_using_subcommand dump" -l interval -d 'Sample twice or more, this far apart, and print rates (e.g. 1s, 500ms)' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand dump" -l count -d 'How many rate samples to print (default 1), --interval apart (default 1s, as --watch)' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand dump" -l sojourn -d 'Measure the queueing delay of real packets (eBPF) for this long first, and include it per class (`sojourn` in the JSON; `=` delays in the tree)' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand dump" -l replay -d 'Read the flight recorder\'s directory (`[record] dir`) instead of the kernel: the tree and counters as they were at --at' -r -f -a "(__fish_complete_directories)"
complete -c tcmon -n "__fish_tcmon_using_subcommand dump" -l at -d 'With --replay: the moment, as `2026-12-07 03:12:05` (UTC), `3h ago` or `now`; the last recorded second at or before it is read. Default: the last recorded' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand dump" -l dev -d 'Only this interface (repeatable; classify: the one the packet takes). Default: all' -r -f -a "(__fish_print_interfaces)"
complete -c tcmon -n "__fish_tcmon_using_subcommand dump" -l netns -d 'Read the named network namespace (/run/netns/NAME) instead of the current one' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand dump" -l config -d 'Config file (default: none; see config.toml for every key and its default)' -r -F
complete -c tcmon -n "__fish_tcmon_using_subcommand dump" -l json -d 'One JSON snapshot (or, with --interval, one JSON object per line)'
complete -c tcmon -n "__fish_tcmon_using_subcommand dump" -l watch -d 'Print a rate sample every --interval (default 1s) until stopped, as `watch tc -s` would; with --json, one object per line'
complete -c tcmon -n "__fish_tcmon_using_subcommand dump" -l no-filters -d 'Skip filters (one dump per parent; the slow part on trees with thousands of classes)'
complete -c tcmon -n "__fish_tcmon_using_subcommand dump" -l no-bpf -d 'Do not measure the queueing delay of real packets with eBPF (`[sojourn] enabled`)'
complete -c tcmon -n "__fish_tcmon_using_subcommand dump" -s v -l verbose -d 'More detail (check: every object of a finding and every command of its fix, not the worst three and the first three)'
complete -c tcmon -n "__fish_tcmon_using_subcommand dump" -s h -l help -d 'Print help'
complete -c tcmon -n "__fish_tcmon_using_subcommand check" -l window -d 'Sampling window, so that rate-based rules see traffic (with --replay: the rates are those of the window that ends at --at)' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand check" -l replay -d 'Read the flight recorder\'s directory (`[record] dir`) instead of the kernel: the tree and counters as they were at --at' -r -f -a "(__fish_complete_directories)"
complete -c tcmon -n "__fish_tcmon_using_subcommand check" -l at -d 'With --replay: the moment, as `2026-12-07 03:12:05` (UTC), `3h ago` or `now`; the last recorded second at or before it is read. Default: the last recorded' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand check" -l ignore -d 'Accept a risk: drop findings with this code (repeatable)' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand check" -l explain -d 'Say what a finding means, why it matters and how its numbers are derived (`list`: all)' -r -f -a "list\t''
queue-too-deep\t''
standing-queue\t''
offload-on-shaped-link\t''
htb-default-class-missing\t''
htb-quantum-small\t''
htb-quantum-big\t''
htb-burst-small\t''
htb-cburst-small\t''
htb-child-burst-exceeds-parent\t''
htb-rates-oversubscribed\t''
htb-ceil-exceeds-parent\t''
htb-rate-exceeds-ceil\t''
htb-giants\t''
class-saturated\t''
tbf-queue-too-deep\t''
tbf-burst-huge\t''
tbf-burst-small\t''
filter-chain-long\t''
filter-rules-unreachable\t''
txqueuelen-deep-unshaped\t''
htb-hysteresis-on\t''
bql-limit-high\t''
bufferbloat\t''"
complete -c tcmon -n "__fish_tcmon_using_subcommand check" -l load -d 'Also run the latency-under-load test against this `tcmon sink` (HOST:PORT) and add a `bufferbloat` finding graded by it' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand check" -l load-duration -d 'With --load: how long the test runs (five phases)' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand check" -l cc -d 'With --load: congestion control of the load streams (reno, cubic, bbr)' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand check" -l dev -d 'Only this interface (repeatable; classify: the one the packet takes). Default: all' -r -f -a "(__fish_print_interfaces)"
complete -c tcmon -n "__fish_tcmon_using_subcommand check" -l netns -d 'Read the named network namespace (/run/netns/NAME) instead of the current one' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand check" -l config -d 'Config file (default: none; see config.toml for every key and its default)' -r -F
complete -c tcmon -n "__fish_tcmon_using_subcommand check" -l json -d '`{"status": ..., "findings": [...]}`'
complete -c tcmon -n "__fish_tcmon_using_subcommand check" -l no-filters -d 'Skip filters (one dump per parent; the slow part on trees with thousands of classes). The findings about filters are then not looked for'
complete -c tcmon -n "__fish_tcmon_using_subcommand check" -l fix-script -d 'Print the fix plan as a shell script (each command once, `tc -batch` per interface, in the namespace of --netns) instead of the report; the exit status is the check\'s. It holds the steps that warning and critical findings need; on failure it prints nothing (the error goes to stderr, exit 3), so `| sh` runs nothing. Not with --replay: a recorded tree is not the one a script would change'
complete -c tcmon -n "__fish_tcmon_using_subcommand check" -l policy -d 'Let the plan (--fix-script, and the `plan` of --json) change policy too: guaranteed rates and ceils made consistent (children within their parent, rates within ceils), each step marked as a policy change'
complete -c tcmon -n "__fish_tcmon_using_subcommand check" -l no-bpf -d 'Do not measure the queueing delay of real packets with eBPF (`[sojourn] enabled`)'
complete -c tcmon -n "__fish_tcmon_using_subcommand check" -s v -l verbose -d 'More detail (check: every object of a finding and every command of its fix, not the worst three and the first three)'
complete -c tcmon -n "__fish_tcmon_using_subcommand check" -s h -l help -d 'Print help'
complete -c tcmon -n "__fish_tcmon_using_subcommand probe" -l load -d 'Load against this `tcmon sink` (HOST:PORT). Without it only current traffic is seen' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand probe" -l duration -d 'Time measured; with --load, five equal phases (connecting and closing the streams add a few seconds)' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand probe" -l interval -d 'Time between probes to each target (at least 2ms)' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand probe" -l timeout -d 'A probe unanswered this long is lost (long: bloated queues answer late, not never)' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand probe" -l streams -d 'TCP streams per direction (at least 1: no load grades nothing)' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand probe" -l dscp -d 'Mark streams with these DSCPs, round robin (BE, BK, CS5, EF; comma separated)' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand probe" -l cc -d 'Congestion control of the load streams, both ends (reno, cubic, bbr). Default: the hosts\'. Delay-based BBR keeps queues short by itself; cubic is what most traffic uses' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand probe" -l dev -d 'Only this interface (repeatable; classify: the one the packet takes). Default: all' -r -f -a "(__fish_print_interfaces)"
complete -c tcmon -n "__fish_tcmon_using_subcommand probe" -l netns -d 'Read the named network namespace (/run/netns/NAME) instead of the current one' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand probe" -l config -d 'Config file (default: none; see config.toml for every key and its default)' -r -F
complete -c tcmon -n "__fish_tcmon_using_subcommand probe" -l json -d '`{"phases": [...], "latency_increase_ms", "grade", "rpm", "bottleneck"}`'
complete -c tcmon -n "__fish_tcmon_using_subcommand probe" -l no-bpf -d 'Do not measure the queueing delay of real packets with eBPF (`[sojourn] enabled`)'
complete -c tcmon -n "__fish_tcmon_using_subcommand probe" -s v -l verbose -d 'More detail (check: every object of a finding and every command of its fix, not the worst three and the first three)'
complete -c tcmon -n "__fish_tcmon_using_subcommand probe" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tcmon -n "__fish_tcmon_using_subcommand classify" -l src -d 'Source address (a filter on the source is undetermined without it)' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand classify" -l proto -d 'tcp, udp, icmp, icmpv6, sctp, gre, esp, ah, ... or a protocol number (default tcp)' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand classify" -l sport -d 'Source port (tcp, udp, sctp; a filter on it is undetermined without it)' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand classify" -l dport -d 'Destination port (tcp, udp, sctp; a filter on it is undetermined without it)' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand classify" -l tos -d 'The whole TOS byte (DSCP << 2 | ECN), decimal or 0x hex, or a DSCP name as probe --dscp takes them: EF is 0xb8' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand classify" -l mark -d 'The packet\'s firewall mark (for fw filters and u32 `mark`)' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand classify" -l dev -d 'Only this interface (repeatable; classify: the one the packet takes). Default: all' -r -f -a "(__fish_print_interfaces)"
complete -c tcmon -n "__fish_tcmon_using_subcommand classify" -l netns -d 'Read the named network namespace (/run/netns/NAME) instead of the current one' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand classify" -l config -d 'Config file (default: none; see config.toml for every key and its default)' -r -F
complete -c tcmon -n "__fish_tcmon_using_subcommand classify" -l ingress -d 'The packet arrives on IF: start at its ingress filters and follow redirects (IFB)'
complete -c tcmon -n "__fish_tcmon_using_subcommand classify" -l json -d '`{"class": "1:5", "path": [...], ...}` on one line'
complete -c tcmon -n "__fish_tcmon_using_subcommand classify" -l no-bpf -d 'Do not measure the queueing delay of real packets with eBPF (`[sojourn] enabled`)'
complete -c tcmon -n "__fish_tcmon_using_subcommand classify" -s v -l verbose -d 'More detail (check: every object of a finding and every command of its fix, not the worst three and the first three)'
complete -c tcmon -n "__fish_tcmon_using_subcommand classify" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tcmon -n "__fish_tcmon_using_subcommand sink" -l listen -d 'TCP and UDP on this address (`:7878` or 0.0.0.0:7878 to serve other hosts; localhost is 127.0.0.1)' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand sink" -l max-connections -d 'Streams open at once; more are refused (at least 1)' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand sink" -l max-stream -d 'Each stream is ended after this long' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand sink" -l idle -d 'A stream that moves nothing this long is ended' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand sink" -l dev -d 'Only this interface (repeatable; classify: the one the packet takes). Default: all' -r -f -a "(__fish_print_interfaces)"
complete -c tcmon -n "__fish_tcmon_using_subcommand sink" -l netns -d 'Read the named network namespace (/run/netns/NAME) instead of the current one' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand sink" -l config -d 'Config file (default: none; see config.toml for every key and its default)' -r -F
complete -c tcmon -n "__fish_tcmon_using_subcommand sink" -l no-bpf -d 'Do not measure the queueing delay of real packets with eBPF (`[sojourn] enabled`)'
complete -c tcmon -n "__fish_tcmon_using_subcommand sink" -s v -l verbose -d 'More detail (check: every object of a finding and every command of its fix, not the worst three and the first three)'
complete -c tcmon -n "__fish_tcmon_using_subcommand sink" -s h -l help -d 'Print help'
complete -c tcmon -n "__fish_tcmon_using_subcommand serve" -l listen -d 'Address to listen on (default: [serve] listen in the config, else 127.0.0.1:29110; `:29110` is every IPv4 address, localhost is 127.0.0.1)' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand serve" -l interval -d 'Poll this often (e.g. 500ms, 2s; at least 100ms). Default: `[agent] interval`, 1s' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand serve" -l dev -d 'Only this interface (repeatable; classify: the one the packet takes). Default: all' -r -f -a "(__fish_print_interfaces)"
complete -c tcmon -n "__fish_tcmon_using_subcommand serve" -l netns -d 'Read the named network namespace (/run/netns/NAME) instead of the current one' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand serve" -l config -d 'Config file (default: none; see config.toml for every key and its default)' -r -F
complete -c tcmon -n "__fish_tcmon_using_subcommand serve" -l no-bpf -d 'Do not measure the queueing delay of real packets with eBPF (`[sojourn] enabled`)'
complete -c tcmon -n "__fish_tcmon_using_subcommand serve" -s v -l verbose -d 'More detail (check: every object of a finding and every command of its fix, not the worst three and the first three)'
complete -c tcmon -n "__fish_tcmon_using_subcommand serve" -s h -l help -d 'Print help'
complete -c tcmon -n "__fish_tcmon_using_subcommand record" -l dir -d 'Record here (default: `[record] dir` in the config)' -r -f -a "(__fish_complete_directories)"
complete -c tcmon -n "__fish_tcmon_using_subcommand record" -l budget -d 'The most the recording keeps on disk, e.g. 2GB, 500MB (default: `[record] budget`)' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand record" -l interval -d 'Poll this often (default: `[agent] interval`, 1s)' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand record" -l dev -d 'Only this interface (repeatable; classify: the one the packet takes). Default: all' -r -f -a "(__fish_print_interfaces)"
complete -c tcmon -n "__fish_tcmon_using_subcommand record" -l netns -d 'Read the named network namespace (/run/netns/NAME) instead of the current one' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand record" -l config -d 'Config file (default: none; see config.toml for every key and its default)' -r -F
complete -c tcmon -n "__fish_tcmon_using_subcommand record" -l no-bpf -d 'Do not measure the queueing delay of real packets with eBPF (`[sojourn] enabled`)'
complete -c tcmon -n "__fish_tcmon_using_subcommand record" -s v -l verbose -d 'More detail (check: every object of a finding and every command of its fix, not the worst three and the first three)'
complete -c tcmon -n "__fish_tcmon_using_subcommand record" -s h -l help -d 'Print help'
complete -c tcmon -n "__fish_tcmon_using_subcommand replay" -l from -d 'From this moment (`2026-12-07 03:00:00` UTC, `3h ago`); default: the first recorded' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand replay" -l to -d 'Up to this moment; default: the last recorded' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand replay" -l limit -d 'Print at most this many intervals (the worst), and how many more there were' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand replay" -l step -d 'With --openmetrics: a sample every this long (Prometheus\'s scrape interval)' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand replay" -l dev -d 'Only this interface (repeatable; classify: the one the packet takes). Default: all' -r -f -a "(__fish_print_interfaces)"
complete -c tcmon -n "__fish_tcmon_using_subcommand replay" -l netns -d 'Read the named network namespace (/run/netns/NAME) instead of the current one' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand replay" -l config -d 'Config file (default: none; see config.toml for every key and its default)' -r -F
complete -c tcmon -n "__fish_tcmon_using_subcommand replay" -l json -d 'The intervals as JSON: `{"from_ms", "to_ms", "intervals": [...]}`, all of them'
complete -c tcmon -n "__fish_tcmon_using_subcommand replay" -l openmetrics -d 'Instead of the intervals: the recorded counters and backlog of every qdisc and class as OpenMetrics with their times, in the families and labels of `serve`\'s /metrics (its `[serve] metrics` groups), for `promtool tsdb create-blocks-from openmetrics`'
complete -c tcmon -n "__fish_tcmon_using_subcommand replay" -l no-bpf -d 'Do not measure the queueing delay of real packets with eBPF (`[sojourn] enabled`)'
complete -c tcmon -n "__fish_tcmon_using_subcommand replay" -s v -l verbose -d 'More detail (check: every object of a finding and every command of its fix, not the worst three and the first three)'
complete -c tcmon -n "__fish_tcmon_using_subcommand replay" -s h -l help -d 'Print help'
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and not __fish_seen_subcommand_from up down list help" -l dev -d 'Only this interface (repeatable; classify: the one the packet takes). Default: all' -r -f -a "(__fish_print_interfaces)"
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and not __fish_seen_subcommand_from up down list help" -l netns -d 'Read the named network namespace (/run/netns/NAME) instead of the current one' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and not __fish_seen_subcommand_from up down list help" -l config -d 'Config file (default: none; see config.toml for every key and its default)' -r -F
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and not __fish_seen_subcommand_from up down list help" -l no-bpf -d 'Do not measure the queueing delay of real packets with eBPF (`[sojourn] enabled`)'
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and not __fish_seen_subcommand_from up down list help" -s v -l verbose -d 'More detail (check: every object of a finding and every command of its fix, not the worst three and the first three)'
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and not __fish_seen_subcommand_from up down list help" -s h -l help -d 'Print help'
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and not __fish_seen_subcommand_from up down list help" -f -a "up" -d 'Build the lab with a scenario (default: default-fifo), replacing any lab already up'
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and not __fish_seen_subcommand_from up down list help" -f -a "down" -d 'Remove the lab'
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and not __fish_seen_subcommand_from up down list help" -f -a "list" -d 'List the scenarios'
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and not __fish_seen_subcommand_from up down list help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and __fish_seen_subcommand_from up" -l dev -d 'Only this interface (repeatable; classify: the one the packet takes). Default: all' -r -f -a "(__fish_print_interfaces)"
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and __fish_seen_subcommand_from up" -l netns -d 'Read the named network namespace (/run/netns/NAME) instead of the current one' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and __fish_seen_subcommand_from up" -l config -d 'Config file (default: none; see config.toml for every key and its default)' -r -F
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and __fish_seen_subcommand_from up" -l no-bpf -d 'Do not measure the queueing delay of real packets with eBPF (`[sojourn] enabled`)'
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and __fish_seen_subcommand_from up" -s v -l verbose -d 'More detail (check: every object of a finding and every command of its fix, not the worst three and the first three)'
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and __fish_seen_subcommand_from up" -s h -l help -d 'Print help'
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and __fish_seen_subcommand_from down" -l dev -d 'Only this interface (repeatable; classify: the one the packet takes). Default: all' -r -f -a "(__fish_print_interfaces)"
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and __fish_seen_subcommand_from down" -l netns -d 'Read the named network namespace (/run/netns/NAME) instead of the current one' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and __fish_seen_subcommand_from down" -l config -d 'Config file (default: none; see config.toml for every key and its default)' -r -F
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and __fish_seen_subcommand_from down" -l no-bpf -d 'Do not measure the queueing delay of real packets with eBPF (`[sojourn] enabled`)'
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and __fish_seen_subcommand_from down" -s v -l verbose -d 'More detail (check: every object of a finding and every command of its fix, not the worst three and the first three)'
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and __fish_seen_subcommand_from down" -s h -l help -d 'Print help'
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and __fish_seen_subcommand_from list" -l dev -d 'Only this interface (repeatable; classify: the one the packet takes). Default: all' -r -f -a "(__fish_print_interfaces)"
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and __fish_seen_subcommand_from list" -l netns -d 'Read the named network namespace (/run/netns/NAME) instead of the current one' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and __fish_seen_subcommand_from list" -l config -d 'Config file (default: none; see config.toml for every key and its default)' -r -F
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and __fish_seen_subcommand_from list" -l no-bpf -d 'Do not measure the queueing delay of real packets with eBPF (`[sojourn] enabled`)'
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and __fish_seen_subcommand_from list" -s v -l verbose -d 'More detail (check: every object of a finding and every command of its fix, not the worst three and the first three)'
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and __fish_seen_subcommand_from help" -f -a "up" -d 'Build the lab with a scenario (default: default-fifo), replacing any lab already up'
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and __fish_seen_subcommand_from help" -f -a "down" -d 'Remove the lab'
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and __fish_seen_subcommand_from help" -f -a "list" -d 'List the scenarios'
complete -c tcmon -n "__fish_tcmon_using_subcommand lab; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c tcmon -n "__fish_tcmon_using_subcommand completions" -l dev -d 'Only this interface (repeatable; classify: the one the packet takes). Default: all' -r -f -a "(__fish_print_interfaces)"
complete -c tcmon -n "__fish_tcmon_using_subcommand completions" -l netns -d 'Read the named network namespace (/run/netns/NAME) instead of the current one' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand completions" -l config -d 'Config file (default: none; see config.toml for every key and its default)' -r -F
complete -c tcmon -n "__fish_tcmon_using_subcommand completions" -l no-bpf -d 'Do not measure the queueing delay of real packets with eBPF (`[sojourn] enabled`)'
complete -c tcmon -n "__fish_tcmon_using_subcommand completions" -s v -l verbose -d 'More detail (check: every object of a finding and every command of its fix, not the worst three and the first three)'
complete -c tcmon -n "__fish_tcmon_using_subcommand completions" -s h -l help -d 'Print help'
complete -c tcmon -n "__fish_tcmon_using_subcommand man" -l out -d 'The directory the pages are written into (created if missing)' -r -F
complete -c tcmon -n "__fish_tcmon_using_subcommand man" -l dev -d 'Only this interface (repeatable; classify: the one the packet takes). Default: all' -r -f -a "(__fish_print_interfaces)"
complete -c tcmon -n "__fish_tcmon_using_subcommand man" -l netns -d 'Read the named network namespace (/run/netns/NAME) instead of the current one' -r
complete -c tcmon -n "__fish_tcmon_using_subcommand man" -l config -d 'Config file (default: none; see config.toml for every key and its default)' -r -F
complete -c tcmon -n "__fish_tcmon_using_subcommand man" -l no-bpf -d 'Do not measure the queueing delay of real packets with eBPF (`[sojourn] enabled`)'
complete -c tcmon -n "__fish_tcmon_using_subcommand man" -s v -l verbose -d 'More detail (check: every object of a finding and every command of its fix, not the worst three and the first three)'
complete -c tcmon -n "__fish_tcmon_using_subcommand man" -s h -l help -d 'Print help'
complete -c tcmon -n "__fish_tcmon_using_subcommand help; and not __fish_seen_subcommand_from dump check probe classify sink serve record replay lab completions man help" -f -a "dump" -d 'Read every qdisc, class and filter once (or sample rates) and print them'
complete -c tcmon -n "__fish_tcmon_using_subcommand help; and not __fish_seen_subcommand_from dump check probe classify sink serve record replay lab completions man help" -f -a "check" -d 'Diagnose the shaper: findings with evidence and fixes; exit 0 ok, 1 warning, 2 critical, 3 unknown'
complete -c tcmon -n "__fish_tcmon_using_subcommand help; and not __fish_seen_subcommand_from dump check probe classify sink serve record replay lab completions man help" -f -a "probe" -d 'Measure latency under load (idle, download, upload, both, idle), grade it and name the queue that holds the delay'
complete -c tcmon -n "__fish_tcmon_using_subcommand help; and not __fish_seen_subcommand_from dump check probe classify sink serve record replay lab completions man help" -f -a "classify" -d 'Which class does a packet land in? Walks the filters as the kernel does and prints the path'
complete -c tcmon -n "__fish_tcmon_using_subcommand help; and not __fish_seen_subcommand_from dump check probe classify sink serve record replay lab completions man help" -f -a "sink" -d 'Serve the other end of `probe --load`: TCP upload/download streams and UDP echo'
complete -c tcmon -n "__fish_tcmon_using_subcommand help; and not __fish_seen_subcommand_from dump check probe classify sink serve record replay lab completions man help" -f -a "serve" -d 'Poll on an interval and serve Prometheus/OpenMetrics metrics, the snapshot and the findings over HTTP'
complete -c tcmon -n "__fish_tcmon_using_subcommand help; and not __fish_seen_subcommand_from dump check probe classify sink serve record replay lab completions man help" -f -a "record" -d 'Poll on an interval and record every poll to disk (the flight recorder), within a byte budget, for `dump --replay` and `check --replay`. `serve` records too when `[record] dir` is set'
complete -c tcmon -n "__fish_tcmon_using_subcommand help; and not __fish_seen_subcommand_from dump check probe classify sink serve record replay lab completions man help" -f -a "replay" -d 'What stood out in a recording: the intervals when a queue held a backlog worth a wait (`[check] queue_delay_warning_ms`), dropped packets or delayed measured packets, worst first'
complete -c tcmon -n "__fish_tcmon_using_subcommand help; and not __fish_seen_subcommand_from dump check probe classify sink serve record replay lab completions man help" -f -a "lab" -d 'Build a lab (node1 - router - node2, a shaper on the router) in network namespaces, to see tcmon on a real shaper. Needs root'
complete -c tcmon -n "__fish_tcmon_using_subcommand help; and not __fish_seen_subcommand_from dump check probe classify sink serve record replay lab completions man help" -f -a "completions" -d 'Print shell completions: `tcmon completions bash > /etc/bash_completion.d/tcmon` (the Debian package installs them for bash, zsh and fish)'
complete -c tcmon -n "__fish_tcmon_using_subcommand help; and not __fish_seen_subcommand_from dump check probe classify sink serve record replay lab completions man help" -f -a "man" -d 'Write the man pages (tcmon.1 and one per command) into a directory'
complete -c tcmon -n "__fish_tcmon_using_subcommand help; and not __fish_seen_subcommand_from dump check probe classify sink serve record replay lab completions man help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c tcmon -n "__fish_tcmon_using_subcommand help; and __fish_seen_subcommand_from lab" -f -a "up" -d 'Build the lab with a scenario (default: default-fifo), replacing any lab already up'
complete -c tcmon -n "__fish_tcmon_using_subcommand help; and __fish_seen_subcommand_from lab" -f -a "down" -d 'Remove the lab'
complete -c tcmon -n "__fish_tcmon_using_subcommand help; and __fish_seen_subcommand_from lab" -f -a "list" -d 'List the scenarios'
