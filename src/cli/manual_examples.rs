//! guard(8)'s EXAMPLES: the three moments an operator reaches for the page.

use roff::{bold, roman, Roff};

/// Each example: a title, what it is for, then the commands with a comment each.
const EXAMPLES: &[(&str, &str, &[&str])] = &[
    (
        "After an HA failover",
        "Is this node usable, and if not, what to do. Only --repair changes the node (and \
         --deep's canary pod, removed after); the table lists failures first, each with \
         seen: (what the guard observed) and fix: (the next step).",
        &[
            "sudo guard verify                    # 0 usable, 1 not (see the table), 4 terminal",
            "sudo guard verify --deep             # also creates and removes a canary pod",
            "sudo guard verify --repair --dry-run # what a repair would do; changes nothing",
            "sudo guard verify --repair           # restart a stale containerd, restore the image",
            "sudo guard reset                     # after fixing the cause of a terminal boot (4)",
        ],
    ),
    (
        "An image build's lint step",
        "Before the image ships (Packer, image-builder, a build chroot): fail the build on a \
         failure, and on a warning with --warn-is-error. Exit 3 means DIR is not an image \
         (missing, or no systemd units).",
        &[
            "guard lint --root /mnt/image --user-data user-data.yaml --warn-is-error",
            "guard --json lint --root /mnt/image > lint.json   # the same, for the build's report",
        ],
    ),
    (
        "Reading guard status",
        "This boot's record, without looking at containerd: phase 1's verdict first (when it \
         held containerd, each failed check with seen: and fix:), then phase 2's last run, \
         the restarts counted against [remediation] restart_budget, and every restart, \
         import, pull, deleted task and killed cgroup with its uptime. A line FAIL \
         remedy.budget: TERMINAL means no more restarts this boot: fix the cause, then guard \
         reset. It exits as guard verify would answer: 0, 1, or 4 when terminal.",
        &[
            "sudo guard status",
            "sudo guard --json status | jq '.state.restarts | length'   # restarts this boot",
        ],
    ),
    (
        "Installing the binary alone",
        "Without the package, the completions and this page are what guard prints:",
        &[
            "guard completion bash > /etc/bash_completion.d/guard",
            "guard completion zsh > /usr/local/share/zsh/site-functions/_guard",
            "guard completion fish > /etc/fish/completions/guard.fish",
            "guard man > /usr/local/share/man/man8/guard.8",
        ],
    ),
];

pub(super) fn examples() -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["EXAMPLES"]);
    for (title, what, lines) in EXAMPLES {
        roff.control("SS", [*title]);
        roff.text([roman(*what)]);
        roff.control("PP", []);
        roff.control("RS", ["4"]);
        roff.control("nf", []);
        for line in *lines {
            roff.text([bold(*line)]);
        }
        roff.control("fi", []);
        roff.control("RE", []);
    }
    roff
}
