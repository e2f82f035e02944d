# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_redlock_global_optspecs
    string join \n servers= config= host= password-file= tls-ca= tls-cert= tls-key= quorum= node-timeout= drift-factor= max-ttl= trust-restarts v/verbose q/quiet log-format= raw-key h/help V/version
end

function __fish_redlock_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_redlock_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_redlock_using_subcommand
    set -l cmd (__fish_redlock_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c redlock -n "__fish_redlock_needs_command" -l servers -d 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path; redis+sentinel://S1,S2/SERVICE and redis+cluster://NODE1,NODE2 are one member each. No default: name them here, in the environment or in the configuration file' -r -f
complete -c redlock -n "__fish_redlock_needs_command" -l config -d 'Read the configuration file FILE (it must exist) instead of $REDLOCK_CONFIG or the default files' -r -F
complete -c redlock -n "__fish_redlock_needs_command" -l host -d 'The name this host goes by in tokens, status and history (letters, digits, `-`, `.`, `_`; at most 64) [default: the kernel\'s host name, the pod\'s name in Kubernetes]' -r -f -a "(__fish_print_hostnames)"
complete -c redlock -n "__fish_redlock_needs_command" -l password-file -d 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]' -r -F
complete -c redlock -n "__fish_redlock_needs_command" -l tls-ca -d 'PEM file of the CA that signed the servers\' TLS certificates (rediss://) [default: the public web roots]' -r -F
complete -c redlock -n "__fish_redlock_needs_command" -l tls-cert -d 'PEM client certificate, for servers that ask for one (with --tls-key)' -r -F
complete -c redlock -n "__fish_redlock_needs_command" -l tls-key -d 'PEM private key of --tls-cert' -r -F
complete -c redlock -n "__fish_redlock_needs_command" -l quorum -d 'Servers that must agree [default: more than half of them]' -r -f
complete -c redlock -n "__fish_redlock_needs_command" -l node-timeout -d 'Time limit for each server call [default: a tenth of the TTL, at most 1s]' -r -f
complete -c redlock -n "__fish_redlock_needs_command" -l drift-factor -d 'Clock drift allowance as a fraction of the TTL' -r -f
complete -c redlock -n "__fish_redlock_needs_command" -l max-ttl -d 'The longest TTL any holder on these servers uses (a longer --ttl is refused): a server restarted less than this (plus 1s) ago, which may have lost a holder\'s key, counts towards no quorum' -r -f
complete -c redlock -n "__fish_redlock_needs_command" -l log-format -d 'Format of the messages on stderr' -r -f -a "text\t'One line of text per message'
json\t'One JSON object per line'"
complete -c redlock -n "__fish_redlock_needs_command" -l trust-restarts -d 'Trust every restarted server to have kept its data: it votes at once (a server with appendonly yes and appendfsync always since its start is trusted without this)'
complete -c redlock -n "__fish_redlock_needs_command" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c redlock -n "__fish_redlock_needs_command" -s q -l quiet -d 'Say nothing on stderr but errors (no busy message)'
complete -c redlock -n "__fish_redlock_needs_command" -l raw-key -d 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock\'s namespace, redlock:{KEY}]'
complete -c redlock -n "__fish_redlock_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redlock -n "__fish_redlock_needs_command" -s V -l version -d 'Print version'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "run" -d 'Run a command while holding the lock, renewing it until the command exits'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "acquire" -d 'Take the lock and print its token on stdout'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "hold" -d 'Hold a lock as a freeze for --for: renewed, taken back after a loss, shown to every waiter; ends early on SIGTERM, SIGINT, SIGHUP or release --force'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "extend" -d 'Make a lock held with a token last at least --ttl from now (never shortens it)'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "release" -d 'Give a lock back (with its token, or --force)'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "status" -d 'Show who holds a lock, on which servers, for how long (exit 0 held, 1 free)'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "history" -d 'Show the last runs of a lock, fleet-wide: host, start, duration, outcome; and the skips'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "check" -d 'For monitoring: did a run start within --max-age, no tick missed, none failed or hung (exit 0 ok, 1 warning, 2 unknown)'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "doctor" -d 'Check that the servers are fit for Redlock (exit 0 fit, 1 warnings)'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "config" -d 'Print the effective configuration and where each value came from (flag, environment, file, default)'
complete -c redlock -n "__fish_redlock_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c redlock -n "__fish_redlock_using_subcommand run" -l servers -d 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path; redis+sentinel://S1,S2/SERVICE and redis+cluster://NODE1,NODE2 are one member each. No default: name them here, in the environment or in the configuration file' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand run" -l config -d 'Read the configuration file FILE (it must exist) instead of $REDLOCK_CONFIG or the default files' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand run" -l host -d 'The name this host goes by in tokens, status and history (letters, digits, `-`, `.`, `_`; at most 64) [default: the kernel\'s host name, the pod\'s name in Kubernetes]' -r -f -a "(__fish_print_hostnames)"
complete -c redlock -n "__fish_redlock_using_subcommand run" -l password-file -d 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand run" -l tls-ca -d 'PEM file of the CA that signed the servers\' TLS certificates (rediss://) [default: the public web roots]' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand run" -l tls-cert -d 'PEM client certificate, for servers that ask for one (with --tls-key)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand run" -l tls-key -d 'PEM private key of --tls-cert' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand run" -l quorum -d 'Servers that must agree [default: more than half of them]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand run" -l node-timeout -d 'Time limit for each server call [default: a tenth of the TTL, at most 1s]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand run" -l drift-factor -d 'Clock drift allowance as a fraction of the TTL' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand run" -l max-ttl -d 'The longest TTL any holder on these servers uses (a longer --ttl is refused): a server restarted less than this (plus 1s) ago, which may have lost a holder\'s key, counts towards no quorum' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand run" -l log-format -d 'Format of the messages on stderr' -r -f -a "text\t'One line of text per message'
json\t'One JSON object per line'"
complete -c redlock -n "__fish_redlock_using_subcommand run" -s k -l key -d 'The lock\'s key (stored as redlock:{KEY}, or as given with --raw-key)' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand run" -l ttl -d 'How long the lock lives on the servers without renewal [default: 30s, or the configuration file\'s ttl]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand run" -s w -l wait -d 'Wait at most DUR for the lock; 0 tries once, a bare number is seconds, forever waits until acquired [default: forever, or the configuration file\'s wait]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand run" -l limit -d 'At most N holders at once (N places; 1 is the ordinary lock). Every holder of the key must use the same N' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand run" -l note -d 'Say where this holder runs (waiters, status and history show it)' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand run" -s E -l conflict-exit-code -d 'Exit code when the lock is busy; with 0 (cron) the busy message shows only with -v' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand run" -l keep -d 'Keep the lock until DUR after acquisition, even when the command ends sooner [default: release at exit]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand run" -l once-per -d 'Run at most once per tick of DUR (below a day, or whole days in --tz\'s zone)' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand run" -l cron -d 'Run at most once per tick of the crontab line EXPR, read in --tz\'s zone' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand run" -l tz -d 'The IANA time zone --cron and --once-per of a day or more are read in [default: $CRON_TZ, $TZ, /etc/localtime, UTC]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand run" -l max-hold -d 'Stop the command when it has held the lock this long, and exit 124 [default: no limit]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand run" -l jitter -d 'Sleep a random time up to DUR (at most 1d) before the first attempt [default: no jitter]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand run" -l renew-every -d 'Renew the lock this often [default: a third of the TTL]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand run" -l on-lost -d 'What to do when the lock is lost: a signal (TERM, SIGINT, 9...), kill, or ignore' -r -f -a "TERM\t''
INT\t''
HUP\t''
QUIT\t''
USR1\t''
USR2\t''
kill\t''
ignore\t''"
complete -c redlock -n "__fish_redlock_using_subcommand run" -l kill-after -d 'Grace between the --on-lost (or --max-hold) signal and SIGKILL [default: a third of the TTL, at most 10s]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand run" -l metrics-file -d 'After the run (or skip), update this Prometheus textfile (for node_exporter), atomically' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand run" -l ping -d 'Ping this cron monitor from the host that runs the tick (healthchecks.io\'s protocol) [env: REDLOCK_PING]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand run" -l ping-file -d 'Read the --ping URL from FILE (keeps its secret out of ps and the crontab)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand run" -s c -l command -d 'Run this shell command through $SHELL -c (or /bin/sh -c)' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand run" -l trust-restarts -d 'Trust every restarted server to have kept its data: it votes at once (a server with appendonly yes and appendfsync always since its start is trusted without this)'
complete -c redlock -n "__fish_redlock_using_subcommand run" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c redlock -n "__fish_redlock_using_subcommand run" -s q -l quiet -d 'Say nothing on stderr but errors (no busy message)'
complete -c redlock -n "__fish_redlock_using_subcommand run" -l raw-key -d 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock\'s namespace, redlock:{KEY}]'
complete -c redlock -n "__fish_redlock_using_subcommand run" -s n -l no-wait -d 'Do not wait: busy if held, or taken since this began'
complete -c redlock -n "__fish_redlock_using_subcommand run" -l unordered -d 'Do not queue: attempt whenever woken, in no order (the behaviour before the wait queue) [default: first come, first served]'
complete -c redlock -n "__fish_redlock_using_subcommand run" -l no-fence -d 'Draw no fencing number (no REDLOCK_FENCE, no counter key)'
complete -c redlock -n "__fish_redlock_using_subcommand run" -s s -l shared -d 'Hold the lock shared: any number of --shared holders at once, or one holder without it, never both'
complete -c redlock -n "__fish_redlock_using_subcommand run" -s x -l exclusive -d 'Hold the lock exclusive, the default: one holder and no --shared one (as flock\'s -x)'
complete -c redlock -n "__fish_redlock_using_subcommand run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redlock -n "__fish_redlock_using_subcommand run" -s V -l version -d 'Print version'
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l servers -d 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path; redis+sentinel://S1,S2/SERVICE and redis+cluster://NODE1,NODE2 are one member each. No default: name them here, in the environment or in the configuration file' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l config -d 'Read the configuration file FILE (it must exist) instead of $REDLOCK_CONFIG or the default files' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l host -d 'The name this host goes by in tokens, status and history (letters, digits, `-`, `.`, `_`; at most 64) [default: the kernel\'s host name, the pod\'s name in Kubernetes]' -r -f -a "(__fish_print_hostnames)"
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l password-file -d 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l tls-ca -d 'PEM file of the CA that signed the servers\' TLS certificates (rediss://) [default: the public web roots]' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l tls-cert -d 'PEM client certificate, for servers that ask for one (with --tls-key)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l tls-key -d 'PEM private key of --tls-cert' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l quorum -d 'Servers that must agree [default: more than half of them]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l node-timeout -d 'Time limit for each server call [default: a tenth of the TTL, at most 1s]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l drift-factor -d 'Clock drift allowance as a fraction of the TTL' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l max-ttl -d 'The longest TTL any holder on these servers uses (a longer --ttl is refused): a server restarted less than this (plus 1s) ago, which may have lost a holder\'s key, counts towards no quorum' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l log-format -d 'Format of the messages on stderr' -r -f -a "text\t'One line of text per message'
json\t'One JSON object per line'"
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -s k -l key -d 'The lock\'s key (stored as redlock:{KEY}, or as given with --raw-key)' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l ttl -d 'How long the lock lives on the servers without renewal [default: 30s, or the configuration file\'s ttl]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -s w -l wait -d 'Wait at most DUR for the lock; 0 tries once, a bare number is seconds, forever waits until acquired [default: forever, or the configuration file\'s wait]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l limit -d 'At most N holders at once (N places; 1 is the ordinary lock). Every holder of the key must use the same N' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l note -d 'Say where this holder runs (waiters, status and history show it)' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l trust-restarts -d 'Trust every restarted server to have kept its data: it votes at once (a server with appendonly yes and appendfsync always since its start is trusted without this)'
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -s q -l quiet -d 'Say nothing on stderr but errors (no busy message)'
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l raw-key -d 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock\'s namespace, redlock:{KEY}]'
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -s n -l no-wait -d 'Do not wait: busy if held, or taken since this began'
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l unordered -d 'Do not queue: attempt whenever woken, in no order (the behaviour before the wait queue) [default: first come, first served]'
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l no-fence -d 'Draw no fencing number (no counter key on the servers)'
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -s s -l shared -d 'Hold the lock shared: any number of --shared holders at once, or one holder without it, never both'
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -s x -l exclusive -d 'Hold the lock exclusive, the default: one holder and no --shared one (as flock\'s -x)'
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -l json -d 'Print {"token", "fence", "validity_ms", "slot"} instead of the token alone'
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redlock -n "__fish_redlock_using_subcommand acquire" -s V -l version -d 'Print version'
complete -c redlock -n "__fish_redlock_using_subcommand hold" -l servers -d 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path; redis+sentinel://S1,S2/SERVICE and redis+cluster://NODE1,NODE2 are one member each. No default: name them here, in the environment or in the configuration file' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand hold" -l config -d 'Read the configuration file FILE (it must exist) instead of $REDLOCK_CONFIG or the default files' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand hold" -l host -d 'The name this host goes by in tokens, status and history (letters, digits, `-`, `.`, `_`; at most 64) [default: the kernel\'s host name, the pod\'s name in Kubernetes]' -r -f -a "(__fish_print_hostnames)"
complete -c redlock -n "__fish_redlock_using_subcommand hold" -l password-file -d 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand hold" -l tls-ca -d 'PEM file of the CA that signed the servers\' TLS certificates (rediss://) [default: the public web roots]' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand hold" -l tls-cert -d 'PEM client certificate, for servers that ask for one (with --tls-key)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand hold" -l tls-key -d 'PEM private key of --tls-cert' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand hold" -l quorum -d 'Servers that must agree [default: more than half of them]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand hold" -l node-timeout -d 'Time limit for each server call [default: a tenth of the TTL, at most 1s]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand hold" -l drift-factor -d 'Clock drift allowance as a fraction of the TTL' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand hold" -l max-ttl -d 'The longest TTL any holder on these servers uses (a longer --ttl is refused): a server restarted less than this (plus 1s) ago, which may have lost a holder\'s key, counts towards no quorum' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand hold" -l log-format -d 'Format of the messages on stderr' -r -f -a "text\t'One line of text per message'
json\t'One JSON object per line'"
complete -c redlock -n "__fish_redlock_using_subcommand hold" -s k -l key -d 'The lock\'s key (stored as redlock:{KEY}, or as given with --raw-key)' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand hold" -l for -d 'How long the freeze lasts, from now (at most 31 days); its end is shown to every waiter' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand hold" -l note -d 'Why the freeze: waiters, status and history show it (at most 200 bytes, no control characters)' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand hold" -s w -l wait -d 'Wait at most DUR for the lock when someone holds it at the start; 0 tries once [default: the whole --for]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand hold" -l trust-restarts -d 'Trust every restarted server to have kept its data: it votes at once (a server with appendonly yes and appendfsync always since its start is trusted without this)'
complete -c redlock -n "__fish_redlock_using_subcommand hold" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c redlock -n "__fish_redlock_using_subcommand hold" -s q -l quiet -d 'Say nothing on stderr but errors (no busy message)'
complete -c redlock -n "__fish_redlock_using_subcommand hold" -l raw-key -d 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock\'s namespace, redlock:{KEY}]'
complete -c redlock -n "__fish_redlock_using_subcommand hold" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redlock -n "__fish_redlock_using_subcommand hold" -s V -l version -d 'Print version'
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l servers -d 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path; redis+sentinel://S1,S2/SERVICE and redis+cluster://NODE1,NODE2 are one member each. No default: name them here, in the environment or in the configuration file' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l config -d 'Read the configuration file FILE (it must exist) instead of $REDLOCK_CONFIG or the default files' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l host -d 'The name this host goes by in tokens, status and history (letters, digits, `-`, `.`, `_`; at most 64) [default: the kernel\'s host name, the pod\'s name in Kubernetes]' -r -f -a "(__fish_print_hostnames)"
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l password-file -d 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l tls-ca -d 'PEM file of the CA that signed the servers\' TLS certificates (rediss://) [default: the public web roots]' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l tls-cert -d 'PEM client certificate, for servers that ask for one (with --tls-key)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l tls-key -d 'PEM private key of --tls-cert' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l quorum -d 'Servers that must agree [default: more than half of them]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l node-timeout -d 'Time limit for each server call [default: a tenth of the TTL, at most 1s]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l drift-factor -d 'Clock drift allowance as a fraction of the TTL' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l max-ttl -d 'The longest TTL any holder on these servers uses (a longer --ttl is refused): a server restarted less than this (plus 1s) ago, which may have lost a holder\'s key, counts towards no quorum' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l log-format -d 'Format of the messages on stderr' -r -f -a "text\t'One line of text per message'
json\t'One JSON object per line'"
complete -c redlock -n "__fish_redlock_using_subcommand extend" -s k -l key -d 'The lock\'s key (stored as redlock:{KEY}, or as given with --raw-key)' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l ttl -d 'How long the lock lives on the servers without renewal [default: 30s, or the configuration file\'s ttl]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand extend" -s t -l token -d 'The token printed by `acquire`' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l trust-restarts -d 'Trust every restarted server to have kept its data: it votes at once (a server with appendonly yes and appendfsync always since its start is trusted without this)'
complete -c redlock -n "__fish_redlock_using_subcommand extend" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c redlock -n "__fish_redlock_using_subcommand extend" -s q -l quiet -d 'Say nothing on stderr but errors (no busy message)'
complete -c redlock -n "__fish_redlock_using_subcommand extend" -l raw-key -d 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock\'s namespace, redlock:{KEY}]'
complete -c redlock -n "__fish_redlock_using_subcommand extend" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redlock -n "__fish_redlock_using_subcommand extend" -s V -l version -d 'Print version'
complete -c redlock -n "__fish_redlock_using_subcommand release" -l servers -d 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path; redis+sentinel://S1,S2/SERVICE and redis+cluster://NODE1,NODE2 are one member each. No default: name them here, in the environment or in the configuration file' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand release" -l config -d 'Read the configuration file FILE (it must exist) instead of $REDLOCK_CONFIG or the default files' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand release" -l host -d 'The name this host goes by in tokens, status and history (letters, digits, `-`, `.`, `_`; at most 64) [default: the kernel\'s host name, the pod\'s name in Kubernetes]' -r -f -a "(__fish_print_hostnames)"
complete -c redlock -n "__fish_redlock_using_subcommand release" -l password-file -d 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand release" -l tls-ca -d 'PEM file of the CA that signed the servers\' TLS certificates (rediss://) [default: the public web roots]' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand release" -l tls-cert -d 'PEM client certificate, for servers that ask for one (with --tls-key)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand release" -l tls-key -d 'PEM private key of --tls-cert' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand release" -l quorum -d 'Servers that must agree [default: more than half of them]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand release" -l node-timeout -d 'Time limit for each server call [default: a tenth of the TTL, at most 1s]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand release" -l drift-factor -d 'Clock drift allowance as a fraction of the TTL' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand release" -l max-ttl -d 'The longest TTL any holder on these servers uses (a longer --ttl is refused): a server restarted less than this (plus 1s) ago, which may have lost a holder\'s key, counts towards no quorum' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand release" -l log-format -d 'Format of the messages on stderr' -r -f -a "text\t'One line of text per message'
json\t'One JSON object per line'"
complete -c redlock -n "__fish_redlock_using_subcommand release" -s k -l key -d 'The lock\'s key' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand release" -s t -l token -d 'The token printed by `acquire`' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand release" -l limit -d 'The places to look at, for a key taken with --limit N [default: as many as the holders\' tokens say]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand release" -l trust-restarts -d 'Trust every restarted server to have kept its data: it votes at once (a server with appendonly yes and appendfsync always since its start is trusted without this)'
complete -c redlock -n "__fish_redlock_using_subcommand release" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c redlock -n "__fish_redlock_using_subcommand release" -s q -l quiet -d 'Say nothing on stderr but errors (no busy message)'
complete -c redlock -n "__fish_redlock_using_subcommand release" -l raw-key -d 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock\'s namespace, redlock:{KEY}]'
complete -c redlock -n "__fish_redlock_using_subcommand release" -l force -d 'Delete the lock whoever holds it (only a value redlock wrote), and say whose it was'
complete -c redlock -n "__fish_redlock_using_subcommand release" -l force-any-value -d 'Like --force, and delete a value that is not a redlock lock too (another client\'s, with --raw-key)'
complete -c redlock -n "__fish_redlock_using_subcommand release" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redlock -n "__fish_redlock_using_subcommand release" -s V -l version -d 'Print version'
complete -c redlock -n "__fish_redlock_using_subcommand status" -l servers -d 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path; redis+sentinel://S1,S2/SERVICE and redis+cluster://NODE1,NODE2 are one member each. No default: name them here, in the environment or in the configuration file' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand status" -l config -d 'Read the configuration file FILE (it must exist) instead of $REDLOCK_CONFIG or the default files' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand status" -l host -d 'The name this host goes by in tokens, status and history (letters, digits, `-`, `.`, `_`; at most 64) [default: the kernel\'s host name, the pod\'s name in Kubernetes]' -r -f -a "(__fish_print_hostnames)"
complete -c redlock -n "__fish_redlock_using_subcommand status" -l password-file -d 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand status" -l tls-ca -d 'PEM file of the CA that signed the servers\' TLS certificates (rediss://) [default: the public web roots]' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand status" -l tls-cert -d 'PEM client certificate, for servers that ask for one (with --tls-key)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand status" -l tls-key -d 'PEM private key of --tls-cert' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand status" -l quorum -d 'Servers that must agree [default: more than half of them]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand status" -l node-timeout -d 'Time limit for each server call [default: a tenth of the TTL, at most 1s]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand status" -l drift-factor -d 'Clock drift allowance as a fraction of the TTL' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand status" -l max-ttl -d 'The longest TTL any holder on these servers uses (a longer --ttl is refused): a server restarted less than this (plus 1s) ago, which may have lost a holder\'s key, counts towards no quorum' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand status" -l log-format -d 'Format of the messages on stderr' -r -f -a "text\t'One line of text per message'
json\t'One JSON object per line'"
complete -c redlock -n "__fish_redlock_using_subcommand status" -s k -l key -d 'The lock\'s key' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand status" -l limit -d 'The places to look at, for a key taken with --limit N [default: as many as the holders\' tokens say]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand status" -l trust-restarts -d 'Trust every restarted server to have kept its data: it votes at once (a server with appendonly yes and appendfsync always since its start is trusted without this)'
complete -c redlock -n "__fish_redlock_using_subcommand status" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c redlock -n "__fish_redlock_using_subcommand status" -s q -l quiet -d 'Say nothing on stderr but errors (no busy message)'
complete -c redlock -n "__fish_redlock_using_subcommand status" -l raw-key -d 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock\'s namespace, redlock:{KEY}]'
complete -c redlock -n "__fish_redlock_using_subcommand status" -l json -d 'Print one JSON object instead of a table'
complete -c redlock -n "__fish_redlock_using_subcommand status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redlock -n "__fish_redlock_using_subcommand status" -s V -l version -d 'Print version'
complete -c redlock -n "__fish_redlock_using_subcommand history" -l servers -d 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path; redis+sentinel://S1,S2/SERVICE and redis+cluster://NODE1,NODE2 are one member each. No default: name them here, in the environment or in the configuration file' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand history" -l config -d 'Read the configuration file FILE (it must exist) instead of $REDLOCK_CONFIG or the default files' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand history" -l host -d 'The name this host goes by in tokens, status and history (letters, digits, `-`, `.`, `_`; at most 64) [default: the kernel\'s host name, the pod\'s name in Kubernetes]' -r -f -a "(__fish_print_hostnames)"
complete -c redlock -n "__fish_redlock_using_subcommand history" -l password-file -d 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand history" -l tls-ca -d 'PEM file of the CA that signed the servers\' TLS certificates (rediss://) [default: the public web roots]' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand history" -l tls-cert -d 'PEM client certificate, for servers that ask for one (with --tls-key)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand history" -l tls-key -d 'PEM private key of --tls-cert' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand history" -l quorum -d 'Servers that must agree [default: more than half of them]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand history" -l node-timeout -d 'Time limit for each server call [default: a tenth of the TTL, at most 1s]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand history" -l drift-factor -d 'Clock drift allowance as a fraction of the TTL' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand history" -l max-ttl -d 'The longest TTL any holder on these servers uses (a longer --ttl is refused): a server restarted less than this (plus 1s) ago, which may have lost a holder\'s key, counts towards no quorum' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand history" -l log-format -d 'Format of the messages on stderr' -r -f -a "text\t'One line of text per message'
json\t'One JSON object per line'"
complete -c redlock -n "__fish_redlock_using_subcommand history" -s k -l key -d 'The lock\'s key' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand history" -s n -l count -d 'How many runs to show, newest first (at most 100, the runs kept per key)' -r
complete -c redlock -n "__fish_redlock_using_subcommand history" -l trust-restarts -d 'Trust every restarted server to have kept its data: it votes at once (a server with appendonly yes and appendfsync always since its start is trusted without this)'
complete -c redlock -n "__fish_redlock_using_subcommand history" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c redlock -n "__fish_redlock_using_subcommand history" -s q -l quiet -d 'Say nothing on stderr but errors (no busy message)'
complete -c redlock -n "__fish_redlock_using_subcommand history" -l raw-key -d 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock\'s namespace, redlock:{KEY}]'
complete -c redlock -n "__fish_redlock_using_subcommand history" -l json -d 'Print one JSON object instead of a table'
complete -c redlock -n "__fish_redlock_using_subcommand history" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redlock -n "__fish_redlock_using_subcommand history" -s V -l version -d 'Print version'
complete -c redlock -n "__fish_redlock_using_subcommand check" -l servers -d 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path; redis+sentinel://S1,S2/SERVICE and redis+cluster://NODE1,NODE2 are one member each. No default: name them here, in the environment or in the configuration file' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand check" -l config -d 'Read the configuration file FILE (it must exist) instead of $REDLOCK_CONFIG or the default files' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand check" -l host -d 'The name this host goes by in tokens, status and history (letters, digits, `-`, `.`, `_`; at most 64) [default: the kernel\'s host name, the pod\'s name in Kubernetes]' -r -f -a "(__fish_print_hostnames)"
complete -c redlock -n "__fish_redlock_using_subcommand check" -l password-file -d 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand check" -l tls-ca -d 'PEM file of the CA that signed the servers\' TLS certificates (rediss://) [default: the public web roots]' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand check" -l tls-cert -d 'PEM client certificate, for servers that ask for one (with --tls-key)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand check" -l tls-key -d 'PEM private key of --tls-cert' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand check" -l quorum -d 'Servers that must agree [default: more than half of them]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand check" -l node-timeout -d 'Time limit for each server call [default: a tenth of the TTL, at most 1s]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand check" -l drift-factor -d 'Clock drift allowance as a fraction of the TTL' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand check" -l max-ttl -d 'The longest TTL any holder on these servers uses (a longer --ttl is refused): a server restarted less than this (plus 1s) ago, which may have lost a holder\'s key, counts towards no quorum' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand check" -l log-format -d 'Format of the messages on stderr' -r -f -a "text\t'One line of text per message'
json\t'One JSON object per line'"
complete -c redlock -n "__fish_redlock_using_subcommand check" -s k -l key -d 'The lock\'s key' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand check" -l max-age -d 'The last run must have started within DUR (e.g. 25h for a daily job)' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand check" -l max-missed -d 'For a key run with --once-per: more than N ticks of the window with no run is a warning [default: 0]' -r
complete -c redlock -n "__fish_redlock_using_subcommand check" -l since -d 'The window that --max-missed and --require-success look at: the last DUR [default: since the oldest run kept]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand check" -l max-runtime -d 'A run still holding the lock for longer than DUR is a warning (a hung job)' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand check" -l trust-restarts -d 'Trust every restarted server to have kept its data: it votes at once (a server with appendonly yes and appendfsync always since its start is trusted without this)'
complete -c redlock -n "__fish_redlock_using_subcommand check" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c redlock -n "__fish_redlock_using_subcommand check" -s q -l quiet -d 'Say nothing on stderr but errors (no busy message)'
complete -c redlock -n "__fish_redlock_using_subcommand check" -l raw-key -d 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock\'s namespace, redlock:{KEY}]'
complete -c redlock -n "__fish_redlock_using_subcommand check" -l require-success -d 'Every run in the window (--since) must also have exited 0'
complete -c redlock -n "__fish_redlock_using_subcommand check" -l json -d 'Print one JSON object instead of the one-line verdict'
complete -c redlock -n "__fish_redlock_using_subcommand check" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redlock -n "__fish_redlock_using_subcommand check" -s V -l version -d 'Print version'
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l servers -d 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path; redis+sentinel://S1,S2/SERVICE and redis+cluster://NODE1,NODE2 are one member each. No default: name them here, in the environment or in the configuration file' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l config -d 'Read the configuration file FILE (it must exist) instead of $REDLOCK_CONFIG or the default files' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l host -d 'The name this host goes by in tokens, status and history (letters, digits, `-`, `.`, `_`; at most 64) [default: the kernel\'s host name, the pod\'s name in Kubernetes]' -r -f -a "(__fish_print_hostnames)"
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l password-file -d 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l tls-ca -d 'PEM file of the CA that signed the servers\' TLS certificates (rediss://) [default: the public web roots]' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l tls-cert -d 'PEM client certificate, for servers that ask for one (with --tls-key)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l tls-key -d 'PEM private key of --tls-cert' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l quorum -d 'Servers that must agree [default: more than half of them]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l node-timeout -d 'Time limit for each server call [default: a tenth of the TTL, at most 1s]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l drift-factor -d 'Clock drift allowance as a fraction of the TTL' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l max-ttl -d 'The longest TTL any holder on these servers uses (a longer --ttl is refused): a server restarted less than this (plus 1s) ago, which may have lost a holder\'s key, counts towards no quorum' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l log-format -d 'Format of the messages on stderr' -r -f -a "text\t'One line of text per message'
json\t'One JSON object per line'"
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l ttl -d 'The TTL whose drift budget the servers\' clocks are checked against [default: 30s, or the configuration file\'s ttl]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l trust-restarts -d 'Trust every restarted server to have kept its data: it votes at once (a server with appendonly yes and appendfsync always since its start is trusted without this)'
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -s q -l quiet -d 'Say nothing on stderr but errors (no busy message)'
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l raw-key -d 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock\'s namespace, redlock:{KEY}]'
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -l json -d 'Print one JSON object instead of a report'
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redlock -n "__fish_redlock_using_subcommand doctor" -s V -l version -d 'Print version'
complete -c redlock -n "__fish_redlock_using_subcommand config" -l servers -d 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path; redis+sentinel://S1,S2/SERVICE and redis+cluster://NODE1,NODE2 are one member each. No default: name them here, in the environment or in the configuration file' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand config" -l config -d 'Read the configuration file FILE (it must exist) instead of $REDLOCK_CONFIG or the default files' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand config" -l host -d 'The name this host goes by in tokens, status and history (letters, digits, `-`, `.`, `_`; at most 64) [default: the kernel\'s host name, the pod\'s name in Kubernetes]' -r -f -a "(__fish_print_hostnames)"
complete -c redlock -n "__fish_redlock_using_subcommand config" -l password-file -d 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand config" -l tls-ca -d 'PEM file of the CA that signed the servers\' TLS certificates (rediss://) [default: the public web roots]' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand config" -l tls-cert -d 'PEM client certificate, for servers that ask for one (with --tls-key)' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand config" -l tls-key -d 'PEM private key of --tls-cert' -r -F
complete -c redlock -n "__fish_redlock_using_subcommand config" -l quorum -d 'Servers that must agree [default: more than half of them]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand config" -l node-timeout -d 'Time limit for each server call [default: a tenth of the TTL, at most 1s]' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand config" -l drift-factor -d 'Clock drift allowance as a fraction of the TTL' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand config" -l max-ttl -d 'The longest TTL any holder on these servers uses (a longer --ttl is refused): a server restarted less than this (plus 1s) ago, which may have lost a holder\'s key, counts towards no quorum' -r -f
complete -c redlock -n "__fish_redlock_using_subcommand config" -l log-format -d 'Format of the messages on stderr' -r -f -a "text\t'One line of text per message'
json\t'One JSON object per line'"
complete -c redlock -n "__fish_redlock_using_subcommand config" -l trust-restarts -d 'Trust every restarted server to have kept its data: it votes at once (a server with appendonly yes and appendfsync always since its start is trusted without this)'
complete -c redlock -n "__fish_redlock_using_subcommand config" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c redlock -n "__fish_redlock_using_subcommand config" -s q -l quiet -d 'Say nothing on stderr but errors (no busy message)'
complete -c redlock -n "__fish_redlock_using_subcommand config" -l raw-key -d 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock\'s namespace, redlock:{KEY}]'
complete -c redlock -n "__fish_redlock_using_subcommand config" -l check -d 'Print nothing but the problems, each on a line of its own (exit 64 if any): a gate for configuration management'
complete -c redlock -n "__fish_redlock_using_subcommand config" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redlock -n "__fish_redlock_using_subcommand config" -s V -l version -d 'Print version'
complete -c redlock -n "__fish_redlock_using_subcommand help; and not __fish_seen_subcommand_from run acquire hold extend release status history check doctor config help" -f -a "run" -d 'Run a command while holding the lock, renewing it until the command exits'
complete -c redlock -n "__fish_redlock_using_subcommand help; and not __fish_seen_subcommand_from run acquire hold extend release status history check doctor config help" -f -a "acquire" -d 'Take the lock and print its token on stdout'
complete -c redlock -n "__fish_redlock_using_subcommand help; and not __fish_seen_subcommand_from run acquire hold extend release status history check doctor config help" -f -a "hold" -d 'Hold a lock as a freeze for --for: renewed, taken back after a loss, shown to every waiter; ends early on SIGTERM, SIGINT, SIGHUP or release --force'
complete -c redlock -n "__fish_redlock_using_subcommand help; and not __fish_seen_subcommand_from run acquire hold extend release status history check doctor config help" -f -a "extend" -d 'Make a lock held with a token last at least --ttl from now (never shortens it)'
complete -c redlock -n "__fish_redlock_using_subcommand help; and not __fish_seen_subcommand_from run acquire hold extend release status history check doctor config help" -f -a "release" -d 'Give a lock back (with its token, or --force)'
complete -c redlock -n "__fish_redlock_using_subcommand help; and not __fish_seen_subcommand_from run acquire hold extend release status history check doctor config help" -f -a "status" -d 'Show who holds a lock, on which servers, for how long (exit 0 held, 1 free)'
complete -c redlock -n "__fish_redlock_using_subcommand help; and not __fish_seen_subcommand_from run acquire hold extend release status history check doctor config help" -f -a "history" -d 'Show the last runs of a lock, fleet-wide: host, start, duration, outcome; and the skips'
complete -c redlock -n "__fish_redlock_using_subcommand help; and not __fish_seen_subcommand_from run acquire hold extend release status history check doctor config help" -f -a "check" -d 'For monitoring: did a run start within --max-age, no tick missed, none failed or hung (exit 0 ok, 1 warning, 2 unknown)'
complete -c redlock -n "__fish_redlock_using_subcommand help; and not __fish_seen_subcommand_from run acquire hold extend release status history check doctor config help" -f -a "doctor" -d 'Check that the servers are fit for Redlock (exit 0 fit, 1 warnings)'
complete -c redlock -n "__fish_redlock_using_subcommand help; and not __fish_seen_subcommand_from run acquire hold extend release status history check doctor config help" -f -a "config" -d 'Print the effective configuration and where each value came from (flag, environment, file, default)'
complete -c redlock -n "__fish_redlock_using_subcommand help; and not __fish_seen_subcommand_from run acquire hold extend release status history check doctor config help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
