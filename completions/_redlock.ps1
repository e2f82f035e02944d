
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'redlock' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'redlock'
        for ($i = 1; $i -lt $commandElements.Count; $i++) {
            $element = $commandElements[$i]
            if ($element -isnot [StringConstantExpressionAst] -or
                $element.StringConstantType -ne [StringConstantType]::BareWord -or
                $element.Value.StartsWith('-') -or
                $element.Value -eq $wordToComplete) {
                break
        }
        $element.Value
    }) -join ';'

    $completions = @(switch ($command) {
        'redlock' {
            [CompletionResult]::new('--servers', '--servers', [CompletionResultType]::ParameterName, 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path; redis+sentinel://S1,S2/SERVICE and redis+cluster://NODE1,NODE2 are one member each. No default: name them here, in the environment or in the configuration file')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Read the configuration file FILE (it must exist) instead of $REDLOCK_CONFIG or the default files')
            [CompletionResult]::new('--host', '--host', [CompletionResultType]::ParameterName, 'The name this host goes by in tokens, status and history (letters, digits, `-`, `.`, `_`; at most 64) [default: the kernel''s host name, the pod''s name in Kubernetes]')
            [CompletionResult]::new('--password-file', '--password-file', [CompletionResultType]::ParameterName, 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]')
            [CompletionResult]::new('--tls-ca', '--tls-ca', [CompletionResultType]::ParameterName, 'PEM file of the CA that signed the servers'' TLS certificates (rediss://) [default: the public web roots]')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'PEM client certificate, for servers that ask for one (with --tls-key)')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'PEM private key of --tls-cert')
            [CompletionResult]::new('--quorum', '--quorum', [CompletionResultType]::ParameterName, 'Servers that must agree [default: more than half of them]')
            [CompletionResult]::new('--node-timeout', '--node-timeout', [CompletionResultType]::ParameterName, 'Time limit for each server call [default: a tenth of the TTL, at most 1s]')
            [CompletionResult]::new('--drift-factor', '--drift-factor', [CompletionResultType]::ParameterName, 'Clock drift allowance as a fraction of the TTL')
            [CompletionResult]::new('--max-ttl', '--max-ttl', [CompletionResultType]::ParameterName, 'The longest TTL any holder on these servers uses (a longer --ttl is refused): a server restarted less than this (plus 1s) ago, which may have lost a holder''s key, counts towards no quorum')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Format of the messages on stderr')
            [CompletionResult]::new('--trust-restarts', '--trust-restarts', [CompletionResultType]::ParameterName, 'Trust every restarted server to have kept its data: it votes at once (a server with appendonly yes and appendfsync always since its start is trusted without this)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors (no busy message)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors (no busy message)')
            [CompletionResult]::new('--raw-key', '--raw-key', [CompletionResultType]::ParameterName, 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock''s namespace, redlock:{KEY}]')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('run', 'run', [CompletionResultType]::ParameterValue, 'Run a command while holding the lock, renewing it until the command exits')
            [CompletionResult]::new('acquire', 'acquire', [CompletionResultType]::ParameterValue, 'Take the lock and print its token on stdout')
            [CompletionResult]::new('hold', 'hold', [CompletionResultType]::ParameterValue, 'Hold a lock as a freeze for --for: renewed, taken back after a loss, shown to every waiter; ends early on SIGTERM, SIGINT, SIGHUP or release --force')
            [CompletionResult]::new('extend', 'extend', [CompletionResultType]::ParameterValue, 'Make a lock held with a token last at least --ttl from now (never shortens it)')
            [CompletionResult]::new('release', 'release', [CompletionResultType]::ParameterValue, 'Give a lock back (with its token, or --force)')
            [CompletionResult]::new('status', 'status', [CompletionResultType]::ParameterValue, 'Show who holds a lock, on which servers, for how long (exit 0 held, 1 free)')
            [CompletionResult]::new('history', 'history', [CompletionResultType]::ParameterValue, 'Show the last runs of a lock, fleet-wide: host, start, duration, outcome; and the skips')
            [CompletionResult]::new('check', 'check', [CompletionResultType]::ParameterValue, 'For monitoring: did a run start within --max-age, no tick missed, none failed or hung (exit 0 ok, 1 warning, 2 unknown)')
            [CompletionResult]::new('doctor', 'doctor', [CompletionResultType]::ParameterValue, 'Check that the servers are fit for Redlock (exit 0 fit, 1 warnings)')
            [CompletionResult]::new('config', 'config', [CompletionResultType]::ParameterValue, 'Print the effective configuration and where each value came from (flag, environment, file, default)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'redlock;run' {
            [CompletionResult]::new('--servers', '--servers', [CompletionResultType]::ParameterName, 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path; redis+sentinel://S1,S2/SERVICE and redis+cluster://NODE1,NODE2 are one member each. No default: name them here, in the environment or in the configuration file')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Read the configuration file FILE (it must exist) instead of $REDLOCK_CONFIG or the default files')
            [CompletionResult]::new('--host', '--host', [CompletionResultType]::ParameterName, 'The name this host goes by in tokens, status and history (letters, digits, `-`, `.`, `_`; at most 64) [default: the kernel''s host name, the pod''s name in Kubernetes]')
            [CompletionResult]::new('--password-file', '--password-file', [CompletionResultType]::ParameterName, 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]')
            [CompletionResult]::new('--tls-ca', '--tls-ca', [CompletionResultType]::ParameterName, 'PEM file of the CA that signed the servers'' TLS certificates (rediss://) [default: the public web roots]')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'PEM client certificate, for servers that ask for one (with --tls-key)')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'PEM private key of --tls-cert')
            [CompletionResult]::new('--quorum', '--quorum', [CompletionResultType]::ParameterName, 'Servers that must agree [default: more than half of them]')
            [CompletionResult]::new('--node-timeout', '--node-timeout', [CompletionResultType]::ParameterName, 'Time limit for each server call [default: a tenth of the TTL, at most 1s]')
            [CompletionResult]::new('--drift-factor', '--drift-factor', [CompletionResultType]::ParameterName, 'Clock drift allowance as a fraction of the TTL')
            [CompletionResult]::new('--max-ttl', '--max-ttl', [CompletionResultType]::ParameterName, 'The longest TTL any holder on these servers uses (a longer --ttl is refused): a server restarted less than this (plus 1s) ago, which may have lost a holder''s key, counts towards no quorum')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Format of the messages on stderr')
            [CompletionResult]::new('-k', '-k', [CompletionResultType]::ParameterName, 'The lock''s key (stored as redlock:{KEY}, or as given with --raw-key)')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'The lock''s key (stored as redlock:{KEY}, or as given with --raw-key)')
            [CompletionResult]::new('--ttl', '--ttl', [CompletionResultType]::ParameterName, 'How long the lock lives on the servers without renewal [default: 30s, or the configuration file''s ttl]')
            [CompletionResult]::new('-w', '-w', [CompletionResultType]::ParameterName, 'Wait at most DUR for the lock; 0 tries once, a bare number is seconds, forever waits until acquired [default: forever, or the configuration file''s wait]')
            [CompletionResult]::new('--wait', '--wait', [CompletionResultType]::ParameterName, 'Wait at most DUR for the lock; 0 tries once, a bare number is seconds, forever waits until acquired [default: forever, or the configuration file''s wait]')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'At most N holders at once (N places; 1 is the ordinary lock). Every holder of the key must use the same N')
            [CompletionResult]::new('--note', '--note', [CompletionResultType]::ParameterName, 'Say where this holder runs (waiters, status and history show it)')
            [CompletionResult]::new('-E', '-E ', [CompletionResultType]::ParameterName, 'Exit code when the lock is busy; with 0 (cron) the busy message shows only with -v')
            [CompletionResult]::new('--conflict-exit-code', '--conflict-exit-code', [CompletionResultType]::ParameterName, 'Exit code when the lock is busy; with 0 (cron) the busy message shows only with -v')
            [CompletionResult]::new('--keep', '--keep', [CompletionResultType]::ParameterName, 'Keep the lock until DUR after acquisition, even when the command ends sooner [default: release at exit]')
            [CompletionResult]::new('--once-per', '--once-per', [CompletionResultType]::ParameterName, 'Run at most once per tick of DUR (below a day, or whole days in --tz''s zone)')
            [CompletionResult]::new('--cron', '--cron', [CompletionResultType]::ParameterName, 'Run at most once per tick of the crontab line EXPR, read in --tz''s zone')
            [CompletionResult]::new('--tz', '--tz', [CompletionResultType]::ParameterName, 'The IANA time zone --cron and --once-per of a day or more are read in [default: $CRON_TZ, $TZ, /etc/localtime, UTC]')
            [CompletionResult]::new('--max-hold', '--max-hold', [CompletionResultType]::ParameterName, 'Stop the command when it has held the lock this long, and exit 124 [default: no limit]')
            [CompletionResult]::new('--jitter', '--jitter', [CompletionResultType]::ParameterName, 'Sleep a random time up to DUR (at most 1d) before the first attempt [default: no jitter]')
            [CompletionResult]::new('--renew-every', '--renew-every', [CompletionResultType]::ParameterName, 'Renew the lock this often [default: a third of the TTL]')
            [CompletionResult]::new('--on-lost', '--on-lost', [CompletionResultType]::ParameterName, 'What to do when the lock is lost: a signal (TERM, SIGINT, 9...), kill, or ignore')
            [CompletionResult]::new('--kill-after', '--kill-after', [CompletionResultType]::ParameterName, 'Grace between the --on-lost (or --max-hold) signal and SIGKILL [default: a third of the TTL, at most 10s]')
            [CompletionResult]::new('--metrics-file', '--metrics-file', [CompletionResultType]::ParameterName, 'After the run (or skip), update this Prometheus textfile (for node_exporter), atomically')
            [CompletionResult]::new('--ping', '--ping', [CompletionResultType]::ParameterName, 'Ping this cron monitor from the host that runs the tick (healthchecks.io''s protocol) [env: REDLOCK_PING]')
            [CompletionResult]::new('--ping-file', '--ping-file', [CompletionResultType]::ParameterName, 'Read the --ping URL from FILE (keeps its secret out of ps and the crontab)')
            [CompletionResult]::new('-c', '-c', [CompletionResultType]::ParameterName, 'Run this shell command through $SHELL -c (or /bin/sh -c)')
            [CompletionResult]::new('--command', '--command', [CompletionResultType]::ParameterName, 'Run this shell command through $SHELL -c (or /bin/sh -c)')
            [CompletionResult]::new('--trust-restarts', '--trust-restarts', [CompletionResultType]::ParameterName, 'Trust every restarted server to have kept its data: it votes at once (a server with appendonly yes and appendfsync always since its start is trusted without this)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors (no busy message)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors (no busy message)')
            [CompletionResult]::new('--raw-key', '--raw-key', [CompletionResultType]::ParameterName, 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock''s namespace, redlock:{KEY}]')
            [CompletionResult]::new('-n', '-n', [CompletionResultType]::ParameterName, 'Do not wait: busy if held, or taken since this began')
            [CompletionResult]::new('--no-wait', '--no-wait', [CompletionResultType]::ParameterName, 'Do not wait: busy if held, or taken since this began')
            [CompletionResult]::new('--unordered', '--unordered', [CompletionResultType]::ParameterName, 'Do not queue: attempt whenever woken, in no order (the behaviour before the wait queue) [default: first come, first served]')
            [CompletionResult]::new('--no-fence', '--no-fence', [CompletionResultType]::ParameterName, 'Draw no fencing number (no REDLOCK_FENCE, no counter key)')
            [CompletionResult]::new('-s', '-s', [CompletionResultType]::ParameterName, 'Hold the lock shared: any number of --shared holders at once, or one holder without it, never both')
            [CompletionResult]::new('--shared', '--shared', [CompletionResultType]::ParameterName, 'Hold the lock shared: any number of --shared holders at once, or one holder without it, never both')
            [CompletionResult]::new('-x', '-x', [CompletionResultType]::ParameterName, 'Hold the lock exclusive, the default: one holder and no --shared one (as flock''s -x)')
            [CompletionResult]::new('--exclusive', '--exclusive', [CompletionResultType]::ParameterName, 'Hold the lock exclusive, the default: one holder and no --shared one (as flock''s -x)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'redlock;acquire' {
            [CompletionResult]::new('--servers', '--servers', [CompletionResultType]::ParameterName, 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path; redis+sentinel://S1,S2/SERVICE and redis+cluster://NODE1,NODE2 are one member each. No default: name them here, in the environment or in the configuration file')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Read the configuration file FILE (it must exist) instead of $REDLOCK_CONFIG or the default files')
            [CompletionResult]::new('--host', '--host', [CompletionResultType]::ParameterName, 'The name this host goes by in tokens, status and history (letters, digits, `-`, `.`, `_`; at most 64) [default: the kernel''s host name, the pod''s name in Kubernetes]')
            [CompletionResult]::new('--password-file', '--password-file', [CompletionResultType]::ParameterName, 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]')
            [CompletionResult]::new('--tls-ca', '--tls-ca', [CompletionResultType]::ParameterName, 'PEM file of the CA that signed the servers'' TLS certificates (rediss://) [default: the public web roots]')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'PEM client certificate, for servers that ask for one (with --tls-key)')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'PEM private key of --tls-cert')
            [CompletionResult]::new('--quorum', '--quorum', [CompletionResultType]::ParameterName, 'Servers that must agree [default: more than half of them]')
            [CompletionResult]::new('--node-timeout', '--node-timeout', [CompletionResultType]::ParameterName, 'Time limit for each server call [default: a tenth of the TTL, at most 1s]')
            [CompletionResult]::new('--drift-factor', '--drift-factor', [CompletionResultType]::ParameterName, 'Clock drift allowance as a fraction of the TTL')
            [CompletionResult]::new('--max-ttl', '--max-ttl', [CompletionResultType]::ParameterName, 'The longest TTL any holder on these servers uses (a longer --ttl is refused): a server restarted less than this (plus 1s) ago, which may have lost a holder''s key, counts towards no quorum')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Format of the messages on stderr')
            [CompletionResult]::new('-k', '-k', [CompletionResultType]::ParameterName, 'The lock''s key (stored as redlock:{KEY}, or as given with --raw-key)')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'The lock''s key (stored as redlock:{KEY}, or as given with --raw-key)')
            [CompletionResult]::new('--ttl', '--ttl', [CompletionResultType]::ParameterName, 'How long the lock lives on the servers without renewal [default: 30s, or the configuration file''s ttl]')
            [CompletionResult]::new('-w', '-w', [CompletionResultType]::ParameterName, 'Wait at most DUR for the lock; 0 tries once, a bare number is seconds, forever waits until acquired [default: forever, or the configuration file''s wait]')
            [CompletionResult]::new('--wait', '--wait', [CompletionResultType]::ParameterName, 'Wait at most DUR for the lock; 0 tries once, a bare number is seconds, forever waits until acquired [default: forever, or the configuration file''s wait]')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'At most N holders at once (N places; 1 is the ordinary lock). Every holder of the key must use the same N')
            [CompletionResult]::new('--note', '--note', [CompletionResultType]::ParameterName, 'Say where this holder runs (waiters, status and history show it)')
            [CompletionResult]::new('--trust-restarts', '--trust-restarts', [CompletionResultType]::ParameterName, 'Trust every restarted server to have kept its data: it votes at once (a server with appendonly yes and appendfsync always since its start is trusted without this)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors (no busy message)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors (no busy message)')
            [CompletionResult]::new('--raw-key', '--raw-key', [CompletionResultType]::ParameterName, 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock''s namespace, redlock:{KEY}]')
            [CompletionResult]::new('-n', '-n', [CompletionResultType]::ParameterName, 'Do not wait: busy if held, or taken since this began')
            [CompletionResult]::new('--no-wait', '--no-wait', [CompletionResultType]::ParameterName, 'Do not wait: busy if held, or taken since this began')
            [CompletionResult]::new('--unordered', '--unordered', [CompletionResultType]::ParameterName, 'Do not queue: attempt whenever woken, in no order (the behaviour before the wait queue) [default: first come, first served]')
            [CompletionResult]::new('--no-fence', '--no-fence', [CompletionResultType]::ParameterName, 'Draw no fencing number (no counter key on the servers)')
            [CompletionResult]::new('-s', '-s', [CompletionResultType]::ParameterName, 'Hold the lock shared: any number of --shared holders at once, or one holder without it, never both')
            [CompletionResult]::new('--shared', '--shared', [CompletionResultType]::ParameterName, 'Hold the lock shared: any number of --shared holders at once, or one holder without it, never both')
            [CompletionResult]::new('-x', '-x', [CompletionResultType]::ParameterName, 'Hold the lock exclusive, the default: one holder and no --shared one (as flock''s -x)')
            [CompletionResult]::new('--exclusive', '--exclusive', [CompletionResultType]::ParameterName, 'Hold the lock exclusive, the default: one holder and no --shared one (as flock''s -x)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print {"token", "fence", "validity_ms", "slot"} instead of the token alone')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'redlock;hold' {
            [CompletionResult]::new('--servers', '--servers', [CompletionResultType]::ParameterName, 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path; redis+sentinel://S1,S2/SERVICE and redis+cluster://NODE1,NODE2 are one member each. No default: name them here, in the environment or in the configuration file')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Read the configuration file FILE (it must exist) instead of $REDLOCK_CONFIG or the default files')
            [CompletionResult]::new('--host', '--host', [CompletionResultType]::ParameterName, 'The name this host goes by in tokens, status and history (letters, digits, `-`, `.`, `_`; at most 64) [default: the kernel''s host name, the pod''s name in Kubernetes]')
            [CompletionResult]::new('--password-file', '--password-file', [CompletionResultType]::ParameterName, 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]')
            [CompletionResult]::new('--tls-ca', '--tls-ca', [CompletionResultType]::ParameterName, 'PEM file of the CA that signed the servers'' TLS certificates (rediss://) [default: the public web roots]')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'PEM client certificate, for servers that ask for one (with --tls-key)')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'PEM private key of --tls-cert')
            [CompletionResult]::new('--quorum', '--quorum', [CompletionResultType]::ParameterName, 'Servers that must agree [default: more than half of them]')
            [CompletionResult]::new('--node-timeout', '--node-timeout', [CompletionResultType]::ParameterName, 'Time limit for each server call [default: a tenth of the TTL, at most 1s]')
            [CompletionResult]::new('--drift-factor', '--drift-factor', [CompletionResultType]::ParameterName, 'Clock drift allowance as a fraction of the TTL')
            [CompletionResult]::new('--max-ttl', '--max-ttl', [CompletionResultType]::ParameterName, 'The longest TTL any holder on these servers uses (a longer --ttl is refused): a server restarted less than this (plus 1s) ago, which may have lost a holder''s key, counts towards no quorum')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Format of the messages on stderr')
            [CompletionResult]::new('-k', '-k', [CompletionResultType]::ParameterName, 'The lock''s key (stored as redlock:{KEY}, or as given with --raw-key)')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'The lock''s key (stored as redlock:{KEY}, or as given with --raw-key)')
            [CompletionResult]::new('--for', '--for', [CompletionResultType]::ParameterName, 'How long the freeze lasts, from now (at most 31 days); its end is shown to every waiter')
            [CompletionResult]::new('--note', '--note', [CompletionResultType]::ParameterName, 'Why the freeze: waiters, status and history show it (at most 200 bytes, no control characters)')
            [CompletionResult]::new('-w', '-w', [CompletionResultType]::ParameterName, 'Wait at most DUR for the lock when someone holds it at the start; 0 tries once [default: the whole --for]')
            [CompletionResult]::new('--wait', '--wait', [CompletionResultType]::ParameterName, 'Wait at most DUR for the lock when someone holds it at the start; 0 tries once [default: the whole --for]')
            [CompletionResult]::new('--trust-restarts', '--trust-restarts', [CompletionResultType]::ParameterName, 'Trust every restarted server to have kept its data: it votes at once (a server with appendonly yes and appendfsync always since its start is trusted without this)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors (no busy message)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors (no busy message)')
            [CompletionResult]::new('--raw-key', '--raw-key', [CompletionResultType]::ParameterName, 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock''s namespace, redlock:{KEY}]')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'redlock;extend' {
            [CompletionResult]::new('--servers', '--servers', [CompletionResultType]::ParameterName, 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path; redis+sentinel://S1,S2/SERVICE and redis+cluster://NODE1,NODE2 are one member each. No default: name them here, in the environment or in the configuration file')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Read the configuration file FILE (it must exist) instead of $REDLOCK_CONFIG or the default files')
            [CompletionResult]::new('--host', '--host', [CompletionResultType]::ParameterName, 'The name this host goes by in tokens, status and history (letters, digits, `-`, `.`, `_`; at most 64) [default: the kernel''s host name, the pod''s name in Kubernetes]')
            [CompletionResult]::new('--password-file', '--password-file', [CompletionResultType]::ParameterName, 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]')
            [CompletionResult]::new('--tls-ca', '--tls-ca', [CompletionResultType]::ParameterName, 'PEM file of the CA that signed the servers'' TLS certificates (rediss://) [default: the public web roots]')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'PEM client certificate, for servers that ask for one (with --tls-key)')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'PEM private key of --tls-cert')
            [CompletionResult]::new('--quorum', '--quorum', [CompletionResultType]::ParameterName, 'Servers that must agree [default: more than half of them]')
            [CompletionResult]::new('--node-timeout', '--node-timeout', [CompletionResultType]::ParameterName, 'Time limit for each server call [default: a tenth of the TTL, at most 1s]')
            [CompletionResult]::new('--drift-factor', '--drift-factor', [CompletionResultType]::ParameterName, 'Clock drift allowance as a fraction of the TTL')
            [CompletionResult]::new('--max-ttl', '--max-ttl', [CompletionResultType]::ParameterName, 'The longest TTL any holder on these servers uses (a longer --ttl is refused): a server restarted less than this (plus 1s) ago, which may have lost a holder''s key, counts towards no quorum')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Format of the messages on stderr')
            [CompletionResult]::new('-k', '-k', [CompletionResultType]::ParameterName, 'The lock''s key (stored as redlock:{KEY}, or as given with --raw-key)')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'The lock''s key (stored as redlock:{KEY}, or as given with --raw-key)')
            [CompletionResult]::new('--ttl', '--ttl', [CompletionResultType]::ParameterName, 'How long the lock lives on the servers without renewal [default: 30s, or the configuration file''s ttl]')
            [CompletionResult]::new('-t', '-t', [CompletionResultType]::ParameterName, 'The token printed by `acquire`')
            [CompletionResult]::new('--token', '--token', [CompletionResultType]::ParameterName, 'The token printed by `acquire`')
            [CompletionResult]::new('--trust-restarts', '--trust-restarts', [CompletionResultType]::ParameterName, 'Trust every restarted server to have kept its data: it votes at once (a server with appendonly yes and appendfsync always since its start is trusted without this)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors (no busy message)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors (no busy message)')
            [CompletionResult]::new('--raw-key', '--raw-key', [CompletionResultType]::ParameterName, 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock''s namespace, redlock:{KEY}]')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'redlock;release' {
            [CompletionResult]::new('--servers', '--servers', [CompletionResultType]::ParameterName, 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path; redis+sentinel://S1,S2/SERVICE and redis+cluster://NODE1,NODE2 are one member each. No default: name them here, in the environment or in the configuration file')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Read the configuration file FILE (it must exist) instead of $REDLOCK_CONFIG or the default files')
            [CompletionResult]::new('--host', '--host', [CompletionResultType]::ParameterName, 'The name this host goes by in tokens, status and history (letters, digits, `-`, `.`, `_`; at most 64) [default: the kernel''s host name, the pod''s name in Kubernetes]')
            [CompletionResult]::new('--password-file', '--password-file', [CompletionResultType]::ParameterName, 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]')
            [CompletionResult]::new('--tls-ca', '--tls-ca', [CompletionResultType]::ParameterName, 'PEM file of the CA that signed the servers'' TLS certificates (rediss://) [default: the public web roots]')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'PEM client certificate, for servers that ask for one (with --tls-key)')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'PEM private key of --tls-cert')
            [CompletionResult]::new('--quorum', '--quorum', [CompletionResultType]::ParameterName, 'Servers that must agree [default: more than half of them]')
            [CompletionResult]::new('--node-timeout', '--node-timeout', [CompletionResultType]::ParameterName, 'Time limit for each server call [default: a tenth of the TTL, at most 1s]')
            [CompletionResult]::new('--drift-factor', '--drift-factor', [CompletionResultType]::ParameterName, 'Clock drift allowance as a fraction of the TTL')
            [CompletionResult]::new('--max-ttl', '--max-ttl', [CompletionResultType]::ParameterName, 'The longest TTL any holder on these servers uses (a longer --ttl is refused): a server restarted less than this (plus 1s) ago, which may have lost a holder''s key, counts towards no quorum')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Format of the messages on stderr')
            [CompletionResult]::new('-k', '-k', [CompletionResultType]::ParameterName, 'The lock''s key')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'The lock''s key')
            [CompletionResult]::new('-t', '-t', [CompletionResultType]::ParameterName, 'The token printed by `acquire`')
            [CompletionResult]::new('--token', '--token', [CompletionResultType]::ParameterName, 'The token printed by `acquire`')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'The places to look at, for a key taken with --limit N [default: as many as the holders'' tokens say]')
            [CompletionResult]::new('--trust-restarts', '--trust-restarts', [CompletionResultType]::ParameterName, 'Trust every restarted server to have kept its data: it votes at once (a server with appendonly yes and appendfsync always since its start is trusted without this)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors (no busy message)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors (no busy message)')
            [CompletionResult]::new('--raw-key', '--raw-key', [CompletionResultType]::ParameterName, 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock''s namespace, redlock:{KEY}]')
            [CompletionResult]::new('--force', '--force', [CompletionResultType]::ParameterName, 'Delete the lock whoever holds it (only a value redlock wrote), and say whose it was')
            [CompletionResult]::new('--force-any-value', '--force-any-value', [CompletionResultType]::ParameterName, 'Like --force, and delete a value that is not a redlock lock too (another client''s, with --raw-key)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'redlock;status' {
            [CompletionResult]::new('--servers', '--servers', [CompletionResultType]::ParameterName, 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path; redis+sentinel://S1,S2/SERVICE and redis+cluster://NODE1,NODE2 are one member each. No default: name them here, in the environment or in the configuration file')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Read the configuration file FILE (it must exist) instead of $REDLOCK_CONFIG or the default files')
            [CompletionResult]::new('--host', '--host', [CompletionResultType]::ParameterName, 'The name this host goes by in tokens, status and history (letters, digits, `-`, `.`, `_`; at most 64) [default: the kernel''s host name, the pod''s name in Kubernetes]')
            [CompletionResult]::new('--password-file', '--password-file', [CompletionResultType]::ParameterName, 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]')
            [CompletionResult]::new('--tls-ca', '--tls-ca', [CompletionResultType]::ParameterName, 'PEM file of the CA that signed the servers'' TLS certificates (rediss://) [default: the public web roots]')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'PEM client certificate, for servers that ask for one (with --tls-key)')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'PEM private key of --tls-cert')
            [CompletionResult]::new('--quorum', '--quorum', [CompletionResultType]::ParameterName, 'Servers that must agree [default: more than half of them]')
            [CompletionResult]::new('--node-timeout', '--node-timeout', [CompletionResultType]::ParameterName, 'Time limit for each server call [default: a tenth of the TTL, at most 1s]')
            [CompletionResult]::new('--drift-factor', '--drift-factor', [CompletionResultType]::ParameterName, 'Clock drift allowance as a fraction of the TTL')
            [CompletionResult]::new('--max-ttl', '--max-ttl', [CompletionResultType]::ParameterName, 'The longest TTL any holder on these servers uses (a longer --ttl is refused): a server restarted less than this (plus 1s) ago, which may have lost a holder''s key, counts towards no quorum')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Format of the messages on stderr')
            [CompletionResult]::new('-k', '-k', [CompletionResultType]::ParameterName, 'The lock''s key')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'The lock''s key')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'The places to look at, for a key taken with --limit N [default: as many as the holders'' tokens say]')
            [CompletionResult]::new('--trust-restarts', '--trust-restarts', [CompletionResultType]::ParameterName, 'Trust every restarted server to have kept its data: it votes at once (a server with appendonly yes and appendfsync always since its start is trusted without this)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors (no busy message)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors (no busy message)')
            [CompletionResult]::new('--raw-key', '--raw-key', [CompletionResultType]::ParameterName, 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock''s namespace, redlock:{KEY}]')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON object instead of a table')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'redlock;history' {
            [CompletionResult]::new('--servers', '--servers', [CompletionResultType]::ParameterName, 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path; redis+sentinel://S1,S2/SERVICE and redis+cluster://NODE1,NODE2 are one member each. No default: name them here, in the environment or in the configuration file')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Read the configuration file FILE (it must exist) instead of $REDLOCK_CONFIG or the default files')
            [CompletionResult]::new('--host', '--host', [CompletionResultType]::ParameterName, 'The name this host goes by in tokens, status and history (letters, digits, `-`, `.`, `_`; at most 64) [default: the kernel''s host name, the pod''s name in Kubernetes]')
            [CompletionResult]::new('--password-file', '--password-file', [CompletionResultType]::ParameterName, 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]')
            [CompletionResult]::new('--tls-ca', '--tls-ca', [CompletionResultType]::ParameterName, 'PEM file of the CA that signed the servers'' TLS certificates (rediss://) [default: the public web roots]')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'PEM client certificate, for servers that ask for one (with --tls-key)')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'PEM private key of --tls-cert')
            [CompletionResult]::new('--quorum', '--quorum', [CompletionResultType]::ParameterName, 'Servers that must agree [default: more than half of them]')
            [CompletionResult]::new('--node-timeout', '--node-timeout', [CompletionResultType]::ParameterName, 'Time limit for each server call [default: a tenth of the TTL, at most 1s]')
            [CompletionResult]::new('--drift-factor', '--drift-factor', [CompletionResultType]::ParameterName, 'Clock drift allowance as a fraction of the TTL')
            [CompletionResult]::new('--max-ttl', '--max-ttl', [CompletionResultType]::ParameterName, 'The longest TTL any holder on these servers uses (a longer --ttl is refused): a server restarted less than this (plus 1s) ago, which may have lost a holder''s key, counts towards no quorum')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Format of the messages on stderr')
            [CompletionResult]::new('-k', '-k', [CompletionResultType]::ParameterName, 'The lock''s key')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'The lock''s key')
            [CompletionResult]::new('-n', '-n', [CompletionResultType]::ParameterName, 'How many runs to show, newest first (at most 100, the runs kept per key)')
            [CompletionResult]::new('--count', '--count', [CompletionResultType]::ParameterName, 'How many runs to show, newest first (at most 100, the runs kept per key)')
            [CompletionResult]::new('--trust-restarts', '--trust-restarts', [CompletionResultType]::ParameterName, 'Trust every restarted server to have kept its data: it votes at once (a server with appendonly yes and appendfsync always since its start is trusted without this)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors (no busy message)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors (no busy message)')
            [CompletionResult]::new('--raw-key', '--raw-key', [CompletionResultType]::ParameterName, 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock''s namespace, redlock:{KEY}]')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON object instead of a table')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'redlock;check' {
            [CompletionResult]::new('--servers', '--servers', [CompletionResultType]::ParameterName, 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path; redis+sentinel://S1,S2/SERVICE and redis+cluster://NODE1,NODE2 are one member each. No default: name them here, in the environment or in the configuration file')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Read the configuration file FILE (it must exist) instead of $REDLOCK_CONFIG or the default files')
            [CompletionResult]::new('--host', '--host', [CompletionResultType]::ParameterName, 'The name this host goes by in tokens, status and history (letters, digits, `-`, `.`, `_`; at most 64) [default: the kernel''s host name, the pod''s name in Kubernetes]')
            [CompletionResult]::new('--password-file', '--password-file', [CompletionResultType]::ParameterName, 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]')
            [CompletionResult]::new('--tls-ca', '--tls-ca', [CompletionResultType]::ParameterName, 'PEM file of the CA that signed the servers'' TLS certificates (rediss://) [default: the public web roots]')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'PEM client certificate, for servers that ask for one (with --tls-key)')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'PEM private key of --tls-cert')
            [CompletionResult]::new('--quorum', '--quorum', [CompletionResultType]::ParameterName, 'Servers that must agree [default: more than half of them]')
            [CompletionResult]::new('--node-timeout', '--node-timeout', [CompletionResultType]::ParameterName, 'Time limit for each server call [default: a tenth of the TTL, at most 1s]')
            [CompletionResult]::new('--drift-factor', '--drift-factor', [CompletionResultType]::ParameterName, 'Clock drift allowance as a fraction of the TTL')
            [CompletionResult]::new('--max-ttl', '--max-ttl', [CompletionResultType]::ParameterName, 'The longest TTL any holder on these servers uses (a longer --ttl is refused): a server restarted less than this (plus 1s) ago, which may have lost a holder''s key, counts towards no quorum')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Format of the messages on stderr')
            [CompletionResult]::new('-k', '-k', [CompletionResultType]::ParameterName, 'The lock''s key')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'The lock''s key')
            [CompletionResult]::new('--max-age', '--max-age', [CompletionResultType]::ParameterName, 'The last run must have started within DUR (e.g. 25h for a daily job)')
            [CompletionResult]::new('--max-missed', '--max-missed', [CompletionResultType]::ParameterName, 'For a key run with --once-per: more than N ticks of the window with no run is a warning [default: 0]')
            [CompletionResult]::new('--since', '--since', [CompletionResultType]::ParameterName, 'The window that --max-missed and --require-success look at: the last DUR [default: since the oldest run kept]')
            [CompletionResult]::new('--max-runtime', '--max-runtime', [CompletionResultType]::ParameterName, 'A run still holding the lock for longer than DUR is a warning (a hung job)')
            [CompletionResult]::new('--trust-restarts', '--trust-restarts', [CompletionResultType]::ParameterName, 'Trust every restarted server to have kept its data: it votes at once (a server with appendonly yes and appendfsync always since its start is trusted without this)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors (no busy message)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors (no busy message)')
            [CompletionResult]::new('--raw-key', '--raw-key', [CompletionResultType]::ParameterName, 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock''s namespace, redlock:{KEY}]')
            [CompletionResult]::new('--require-success', '--require-success', [CompletionResultType]::ParameterName, 'Every run in the window (--since) must also have exited 0')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON object instead of the one-line verdict')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'redlock;doctor' {
            [CompletionResult]::new('--servers', '--servers', [CompletionResultType]::ParameterName, 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path; redis+sentinel://S1,S2/SERVICE and redis+cluster://NODE1,NODE2 are one member each. No default: name them here, in the environment or in the configuration file')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Read the configuration file FILE (it must exist) instead of $REDLOCK_CONFIG or the default files')
            [CompletionResult]::new('--host', '--host', [CompletionResultType]::ParameterName, 'The name this host goes by in tokens, status and history (letters, digits, `-`, `.`, `_`; at most 64) [default: the kernel''s host name, the pod''s name in Kubernetes]')
            [CompletionResult]::new('--password-file', '--password-file', [CompletionResultType]::ParameterName, 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]')
            [CompletionResult]::new('--tls-ca', '--tls-ca', [CompletionResultType]::ParameterName, 'PEM file of the CA that signed the servers'' TLS certificates (rediss://) [default: the public web roots]')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'PEM client certificate, for servers that ask for one (with --tls-key)')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'PEM private key of --tls-cert')
            [CompletionResult]::new('--quorum', '--quorum', [CompletionResultType]::ParameterName, 'Servers that must agree [default: more than half of them]')
            [CompletionResult]::new('--node-timeout', '--node-timeout', [CompletionResultType]::ParameterName, 'Time limit for each server call [default: a tenth of the TTL, at most 1s]')
            [CompletionResult]::new('--drift-factor', '--drift-factor', [CompletionResultType]::ParameterName, 'Clock drift allowance as a fraction of the TTL')
            [CompletionResult]::new('--max-ttl', '--max-ttl', [CompletionResultType]::ParameterName, 'The longest TTL any holder on these servers uses (a longer --ttl is refused): a server restarted less than this (plus 1s) ago, which may have lost a holder''s key, counts towards no quorum')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Format of the messages on stderr')
            [CompletionResult]::new('--ttl', '--ttl', [CompletionResultType]::ParameterName, 'The TTL whose drift budget the servers'' clocks are checked against [default: 30s, or the configuration file''s ttl]')
            [CompletionResult]::new('--trust-restarts', '--trust-restarts', [CompletionResultType]::ParameterName, 'Trust every restarted server to have kept its data: it votes at once (a server with appendonly yes and appendfsync always since its start is trusted without this)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors (no busy message)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors (no busy message)')
            [CompletionResult]::new('--raw-key', '--raw-key', [CompletionResultType]::ParameterName, 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock''s namespace, redlock:{KEY}]')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON object instead of a report')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'redlock;config' {
            [CompletionResult]::new('--servers', '--servers', [CompletionResultType]::ParameterName, 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path; redis+sentinel://S1,S2/SERVICE and redis+cluster://NODE1,NODE2 are one member each. No default: name them here, in the environment or in the configuration file')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Read the configuration file FILE (it must exist) instead of $REDLOCK_CONFIG or the default files')
            [CompletionResult]::new('--host', '--host', [CompletionResultType]::ParameterName, 'The name this host goes by in tokens, status and history (letters, digits, `-`, `.`, `_`; at most 64) [default: the kernel''s host name, the pod''s name in Kubernetes]')
            [CompletionResult]::new('--password-file', '--password-file', [CompletionResultType]::ParameterName, 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]')
            [CompletionResult]::new('--tls-ca', '--tls-ca', [CompletionResultType]::ParameterName, 'PEM file of the CA that signed the servers'' TLS certificates (rediss://) [default: the public web roots]')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'PEM client certificate, for servers that ask for one (with --tls-key)')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'PEM private key of --tls-cert')
            [CompletionResult]::new('--quorum', '--quorum', [CompletionResultType]::ParameterName, 'Servers that must agree [default: more than half of them]')
            [CompletionResult]::new('--node-timeout', '--node-timeout', [CompletionResultType]::ParameterName, 'Time limit for each server call [default: a tenth of the TTL, at most 1s]')
            [CompletionResult]::new('--drift-factor', '--drift-factor', [CompletionResultType]::ParameterName, 'Clock drift allowance as a fraction of the TTL')
            [CompletionResult]::new('--max-ttl', '--max-ttl', [CompletionResultType]::ParameterName, 'The longest TTL any holder on these servers uses (a longer --ttl is refused): a server restarted less than this (plus 1s) ago, which may have lost a holder''s key, counts towards no quorum')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Format of the messages on stderr')
            [CompletionResult]::new('--trust-restarts', '--trust-restarts', [CompletionResultType]::ParameterName, 'Trust every restarted server to have kept its data: it votes at once (a server with appendonly yes and appendfsync always since its start is trusted without this)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Say more on stderr (repeat for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors (no busy message)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Say nothing on stderr but errors (no busy message)')
            [CompletionResult]::new('--raw-key', '--raw-key', [CompletionResultType]::ParameterName, 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock''s namespace, redlock:{KEY}]')
            [CompletionResult]::new('--check', '--check', [CompletionResultType]::ParameterName, 'Print nothing but the problems, each on a line of its own (exit 64 if any): a gate for configuration management')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'redlock;help' {
            [CompletionResult]::new('run', 'run', [CompletionResultType]::ParameterValue, 'Run a command while holding the lock, renewing it until the command exits')
            [CompletionResult]::new('acquire', 'acquire', [CompletionResultType]::ParameterValue, 'Take the lock and print its token on stdout')
            [CompletionResult]::new('hold', 'hold', [CompletionResultType]::ParameterValue, 'Hold a lock as a freeze for --for: renewed, taken back after a loss, shown to every waiter; ends early on SIGTERM, SIGINT, SIGHUP or release --force')
            [CompletionResult]::new('extend', 'extend', [CompletionResultType]::ParameterValue, 'Make a lock held with a token last at least --ttl from now (never shortens it)')
            [CompletionResult]::new('release', 'release', [CompletionResultType]::ParameterValue, 'Give a lock back (with its token, or --force)')
            [CompletionResult]::new('status', 'status', [CompletionResultType]::ParameterValue, 'Show who holds a lock, on which servers, for how long (exit 0 held, 1 free)')
            [CompletionResult]::new('history', 'history', [CompletionResultType]::ParameterValue, 'Show the last runs of a lock, fleet-wide: host, start, duration, outcome; and the skips')
            [CompletionResult]::new('check', 'check', [CompletionResultType]::ParameterValue, 'For monitoring: did a run start within --max-age, no tick missed, none failed or hung (exit 0 ok, 1 warning, 2 unknown)')
            [CompletionResult]::new('doctor', 'doctor', [CompletionResultType]::ParameterValue, 'Check that the servers are fit for Redlock (exit 0 fit, 1 warnings)')
            [CompletionResult]::new('config', 'config', [CompletionResultType]::ParameterValue, 'Print the effective configuration and where each value came from (flag, environment, file, default)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'redlock;help;run' {
            break
        }
        'redlock;help;acquire' {
            break
        }
        'redlock;help;hold' {
            break
        }
        'redlock;help;extend' {
            break
        }
        'redlock;help;release' {
            break
        }
        'redlock;help;status' {
            break
        }
        'redlock;help;history' {
            break
        }
        'redlock;help;check' {
            break
        }
        'redlock;help;doctor' {
            break
        }
        'redlock;help;config' {
            break
        }
        'redlock;help;help' {
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}
