
use builtin;
use str;

set edit:completion:arg-completer[redlock] = {|@words|
    fn spaces {|n|
        builtin:repeat $n ' ' | str:join ''
    }
    fn cand {|text desc|
        edit:complex-candidate $text &display=$text' '(spaces (- 14 (wcswidth $text)))$desc
    }
    var command = 'redlock'
    for word $words[1..-1] {
        if (str:has-prefix $word '-') {
            break
        }
        set command = $command';'$word
    }
    var completions = [
        &'redlock'= {
            cand --servers 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path'
            cand --password-file 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]'
            cand --tls-ca 'PEM file of the CA that signed the servers'' TLS certificates (rediss://) [default: the public web roots]'
            cand --tls-cert 'PEM client certificate, for servers that ask for one (with --tls-key)'
            cand --tls-key 'PEM private key of --tls-cert'
            cand --quorum 'Servers that must agree [default: more than half of them]'
            cand --node-timeout 'Time limit for each server call [default: a tenth of the TTL, at most 1s]'
            cand --drift-factor 'Clock drift allowance as a fraction of the TTL'
            cand --log-format 'Format of the messages on stderr'
            cand -v 'Say more on stderr (repeat for more)'
            cand --verbose 'Say more on stderr (repeat for more)'
            cand -q 'Say nothing on stderr but errors (no busy message)'
            cand --quiet 'Say nothing on stderr but errors (no busy message)'
            cand --raw-key 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock''s namespace, redlock:{KEY}]'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
            cand run 'Run a command while holding the lock, renewing it until the command exits'
            cand acquire 'Take the lock and print its token on stdout'
            cand extend 'Make a lock held with a token last at least --ttl from now (never shortens it)'
            cand release 'Give a lock back (with its token, or --force)'
            cand status 'Show who holds a lock, on which servers, for how long (exit 0 held, 1 free)'
            cand doctor 'Check that the servers are fit for Redlock (exit 0 fit, 1 warnings)'
            cand config 'Print the effective configuration and where each value came from (flag, environment, file, default)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'redlock;run'= {
            cand -k 'The lock''s key (stored as redlock:{KEY}, or as given with --raw-key)'
            cand --key 'The lock''s key (stored as redlock:{KEY}, or as given with --raw-key)'
            cand --ttl 'How long the lock lives on the servers without renewal'
            cand -w 'Wait at most DUR for the lock; 0 tries once, a bare number is seconds [default: wait until acquired]'
            cand --wait 'Wait at most DUR for the lock; 0 tries once, a bare number is seconds [default: wait until acquired]'
            cand -E 'Exit code when the lock is busy; with 0 (cron) the busy message shows only with -v'
            cand --conflict-exit-code 'Exit code when the lock is busy; with 0 (cron) the busy message shows only with -v'
            cand --keep 'Keep the lock until DUR after acquisition, even when the command ends sooner [default: release at exit]'
            cand --max-hold 'Stop the command when it has held the lock this long, and exit 124 [default: no limit]'
            cand --jitter 'Sleep a random time up to DUR before the first attempt [default: no jitter]'
            cand --renew-every 'Renew the lock this often [default: a third of the TTL]'
            cand --on-lost 'What to do when the lock is lost: a signal (TERM, SIGINT, 9...), kill, or ignore'
            cand --kill-after 'Grace between the --on-lost (or --max-hold) signal and SIGKILL [default: a third of the TTL, at most 10s]'
            cand -c 'Run this shell command through $SHELL -c (or /bin/sh -c)'
            cand --command 'Run this shell command through $SHELL -c (or /bin/sh -c)'
            cand --servers 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path'
            cand --password-file 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]'
            cand --tls-ca 'PEM file of the CA that signed the servers'' TLS certificates (rediss://) [default: the public web roots]'
            cand --tls-cert 'PEM client certificate, for servers that ask for one (with --tls-key)'
            cand --tls-key 'PEM private key of --tls-cert'
            cand --quorum 'Servers that must agree [default: more than half of them]'
            cand --node-timeout 'Time limit for each server call [default: a tenth of the TTL, at most 1s]'
            cand --drift-factor 'Clock drift allowance as a fraction of the TTL'
            cand --log-format 'Format of the messages on stderr'
            cand -n 'Try once; fail at once when the lock is busy (as --wait 0)'
            cand --no-wait 'Try once; fail at once when the lock is busy (as --wait 0)'
            cand --unordered 'Do not queue: attempt whenever woken, in no order (the behaviour before the wait queue) [default: first come, first served]'
            cand --no-fence 'Draw no fencing number (no REDLOCK_FENCE, no counter key on the servers)'
            cand -v 'Say more on stderr (repeat for more)'
            cand --verbose 'Say more on stderr (repeat for more)'
            cand -q 'Say nothing on stderr but errors (no busy message)'
            cand --quiet 'Say nothing on stderr but errors (no busy message)'
            cand --raw-key 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock''s namespace, redlock:{KEY}]'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'redlock;acquire'= {
            cand -k 'The lock''s key (stored as redlock:{KEY}, or as given with --raw-key)'
            cand --key 'The lock''s key (stored as redlock:{KEY}, or as given with --raw-key)'
            cand --ttl 'How long the lock lives on the servers without renewal'
            cand -w 'Wait at most DUR for the lock; 0 tries once, a bare number is seconds [default: wait until acquired]'
            cand --wait 'Wait at most DUR for the lock; 0 tries once, a bare number is seconds [default: wait until acquired]'
            cand --servers 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path'
            cand --password-file 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]'
            cand --tls-ca 'PEM file of the CA that signed the servers'' TLS certificates (rediss://) [default: the public web roots]'
            cand --tls-cert 'PEM client certificate, for servers that ask for one (with --tls-key)'
            cand --tls-key 'PEM private key of --tls-cert'
            cand --quorum 'Servers that must agree [default: more than half of them]'
            cand --node-timeout 'Time limit for each server call [default: a tenth of the TTL, at most 1s]'
            cand --drift-factor 'Clock drift allowance as a fraction of the TTL'
            cand --log-format 'Format of the messages on stderr'
            cand -n 'Try once; fail at once when the lock is busy (as --wait 0)'
            cand --no-wait 'Try once; fail at once when the lock is busy (as --wait 0)'
            cand --unordered 'Do not queue: attempt whenever woken, in no order (the behaviour before the wait queue) [default: first come, first served]'
            cand --no-fence 'Draw no fencing number (no counter key on the servers)'
            cand --json 'Print {"token", "fence", "validity_ms"} instead of the token alone'
            cand -v 'Say more on stderr (repeat for more)'
            cand --verbose 'Say more on stderr (repeat for more)'
            cand -q 'Say nothing on stderr but errors (no busy message)'
            cand --quiet 'Say nothing on stderr but errors (no busy message)'
            cand --raw-key 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock''s namespace, redlock:{KEY}]'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'redlock;extend'= {
            cand -k 'The lock''s key (stored as redlock:{KEY}, or as given with --raw-key)'
            cand --key 'The lock''s key (stored as redlock:{KEY}, or as given with --raw-key)'
            cand --ttl 'How long the lock lives on the servers without renewal'
            cand -t 'The token printed by `acquire`'
            cand --token 'The token printed by `acquire`'
            cand --servers 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path'
            cand --password-file 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]'
            cand --tls-ca 'PEM file of the CA that signed the servers'' TLS certificates (rediss://) [default: the public web roots]'
            cand --tls-cert 'PEM client certificate, for servers that ask for one (with --tls-key)'
            cand --tls-key 'PEM private key of --tls-cert'
            cand --quorum 'Servers that must agree [default: more than half of them]'
            cand --node-timeout 'Time limit for each server call [default: a tenth of the TTL, at most 1s]'
            cand --drift-factor 'Clock drift allowance as a fraction of the TTL'
            cand --log-format 'Format of the messages on stderr'
            cand -v 'Say more on stderr (repeat for more)'
            cand --verbose 'Say more on stderr (repeat for more)'
            cand -q 'Say nothing on stderr but errors (no busy message)'
            cand --quiet 'Say nothing on stderr but errors (no busy message)'
            cand --raw-key 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock''s namespace, redlock:{KEY}]'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'redlock;release'= {
            cand -k 'The lock''s key'
            cand --key 'The lock''s key'
            cand -t 'The token printed by `acquire`'
            cand --token 'The token printed by `acquire`'
            cand --servers 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path'
            cand --password-file 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]'
            cand --tls-ca 'PEM file of the CA that signed the servers'' TLS certificates (rediss://) [default: the public web roots]'
            cand --tls-cert 'PEM client certificate, for servers that ask for one (with --tls-key)'
            cand --tls-key 'PEM private key of --tls-cert'
            cand --quorum 'Servers that must agree [default: more than half of them]'
            cand --node-timeout 'Time limit for each server call [default: a tenth of the TTL, at most 1s]'
            cand --drift-factor 'Clock drift allowance as a fraction of the TTL'
            cand --log-format 'Format of the messages on stderr'
            cand --force 'Delete the lock whoever holds it (only a value redlock wrote)'
            cand --force-any-value 'Like --force, and delete a value that is not a redlock lock too (another client''s, with --raw-key)'
            cand -v 'Say more on stderr (repeat for more)'
            cand --verbose 'Say more on stderr (repeat for more)'
            cand -q 'Say nothing on stderr but errors (no busy message)'
            cand --quiet 'Say nothing on stderr but errors (no busy message)'
            cand --raw-key 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock''s namespace, redlock:{KEY}]'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'redlock;status'= {
            cand -k 'The lock''s key'
            cand --key 'The lock''s key'
            cand --servers 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path'
            cand --password-file 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]'
            cand --tls-ca 'PEM file of the CA that signed the servers'' TLS certificates (rediss://) [default: the public web roots]'
            cand --tls-cert 'PEM client certificate, for servers that ask for one (with --tls-key)'
            cand --tls-key 'PEM private key of --tls-cert'
            cand --quorum 'Servers that must agree [default: more than half of them]'
            cand --node-timeout 'Time limit for each server call [default: a tenth of the TTL, at most 1s]'
            cand --drift-factor 'Clock drift allowance as a fraction of the TTL'
            cand --log-format 'Format of the messages on stderr'
            cand --json 'Print one JSON object instead of a table'
            cand -v 'Say more on stderr (repeat for more)'
            cand --verbose 'Say more on stderr (repeat for more)'
            cand -q 'Say nothing on stderr but errors (no busy message)'
            cand --quiet 'Say nothing on stderr but errors (no busy message)'
            cand --raw-key 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock''s namespace, redlock:{KEY}]'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'redlock;doctor'= {
            cand --ttl 'The TTL whose drift budget the servers'' clocks are checked against'
            cand --servers 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path'
            cand --password-file 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]'
            cand --tls-ca 'PEM file of the CA that signed the servers'' TLS certificates (rediss://) [default: the public web roots]'
            cand --tls-cert 'PEM client certificate, for servers that ask for one (with --tls-key)'
            cand --tls-key 'PEM private key of --tls-cert'
            cand --quorum 'Servers that must agree [default: more than half of them]'
            cand --node-timeout 'Time limit for each server call [default: a tenth of the TTL, at most 1s]'
            cand --drift-factor 'Clock drift allowance as a fraction of the TTL'
            cand --log-format 'Format of the messages on stderr'
            cand --json 'Print one JSON object instead of a report'
            cand -v 'Say more on stderr (repeat for more)'
            cand --verbose 'Say more on stderr (repeat for more)'
            cand -q 'Say nothing on stderr but errors (no busy message)'
            cand --quiet 'Say nothing on stderr but errors (no busy message)'
            cand --raw-key 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock''s namespace, redlock:{KEY}]'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'redlock;config'= {
            cand --servers 'Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path'
            cand --password-file 'Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]'
            cand --tls-ca 'PEM file of the CA that signed the servers'' TLS certificates (rediss://) [default: the public web roots]'
            cand --tls-cert 'PEM client certificate, for servers that ask for one (with --tls-key)'
            cand --tls-key 'PEM private key of --tls-cert'
            cand --quorum 'Servers that must agree [default: more than half of them]'
            cand --node-timeout 'Time limit for each server call [default: a tenth of the TTL, at most 1s]'
            cand --drift-factor 'Clock drift allowance as a fraction of the TTL'
            cand --log-format 'Format of the messages on stderr'
            cand -v 'Say more on stderr (repeat for more)'
            cand --verbose 'Say more on stderr (repeat for more)'
            cand -q 'Say nothing on stderr but errors (no busy message)'
            cand --quiet 'Say nothing on stderr but errors (no busy message)'
            cand --raw-key 'Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock''s namespace, redlock:{KEY}]'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'redlock;help'= {
            cand run 'Run a command while holding the lock, renewing it until the command exits'
            cand acquire 'Take the lock and print its token on stdout'
            cand extend 'Make a lock held with a token last at least --ttl from now (never shortens it)'
            cand release 'Give a lock back (with its token, or --force)'
            cand status 'Show who holds a lock, on which servers, for how long (exit 0 held, 1 free)'
            cand doctor 'Check that the servers are fit for Redlock (exit 0 fit, 1 warnings)'
            cand config 'Print the effective configuration and where each value came from (flag, environment, file, default)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'redlock;help;run'= {
        }
        &'redlock;help;acquire'= {
        }
        &'redlock;help;extend'= {
        }
        &'redlock;help;release'= {
        }
        &'redlock;help;status'= {
        }
        &'redlock;help;doctor'= {
        }
        &'redlock;help;config'= {
        }
        &'redlock;help;help'= {
        }
    ]
    $completions[$command]
}
