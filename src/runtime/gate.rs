//! The phase-2 pipeline: probe -> policy -> (bounded) act -> probe again, until usable,
//! or out of time, budget or ideas. Used by `guard runtime` (hold + repair), `guard verify`
//! (read-only, one pass) and `guard verify --repair` (repair, no hold).

use super::act::{self, Import};
use super::probe::{self, Target};
use crate::config::containerd::ContainerdConfig;
use crate::config::units::format_duration;
use crate::config::Settings;
use crate::host::Host;
use crate::policy::budget::{self, Decision};
use crate::policy::runtime::{evaluate, normalize_ref, Knobs, RestartReason};
use crate::report::{Finding, Status};
use crate::state::{self, Loaded, Outcome, Record, State, Store};
use crate::state_file::read_volume_record;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
pub struct Mode {
    /// Wait for the node to become usable up to `[hold] timeout`.
    pub hold: bool,
    /// Apply remedies (within the budget).
    pub repair: bool,
    /// Restart even when the stale containerd still runs tasks.
    pub force: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Usable,
    Unusable,
    Terminal,
}

pub struct Gate {
    pub findings: Vec<Finding>,
    pub end: End,
}

/// How long a restart command may run.
const RESTART_COMMAND_TIMEOUT: Duration = Duration::from_secs(120);
/// Read-only `guard verify` does not wait long for a silent containerd.
const VERIFY_WAIT: Duration = Duration::from_secs(5);

pub fn target(settings: &Settings, cd: &ContainerdConfig) -> Target {
    let (image_ref, image_source) = match &settings.sandbox.image {
        Some(i) => (i.clone(), "[sandbox] image".to_string()),
        None => (cd.sandbox_image.clone(), cd.sandbox_image_key.to_string()),
    };
    Target {
        socket: settings
            .containerd
            .socket
            .clone()
            .unwrap_or_else(|| cd.address.clone()),
        root: cd.root.clone(),
        image_ref,
        image_source,
        snapshotter: cd.snapshotter.clone(),
    }
}

/// Runs the gate on a current-thread runtime (phase 2 only; phase 1 never starts one).
pub fn run(
    host: &Host,
    settings: &Settings,
    cd: &ContainerdConfig,
    mode: Mode,
    command: &str,
) -> Gate {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return Gate {
                findings: vec![Finding::fail(
                    "runtime.answers",
                    "cannot start the guard's I/O runtime",
                )
                .evidence(e.to_string())],
                end: End::Unusable,
            }
        }
    };
    rt.block_on(gate(host, settings, cd, mode, command))
}

struct Remedies {
    findings: Vec<Finding>,
}

impl Remedies {
    /// One finding per remedy id, the latest wins (the table shows one line per item).
    fn set(&mut self, f: Finding) {
        self.findings.retain(|old| old.id != f.id);
        self.findings.push(f);
    }
}

fn record(state: &mut Option<State>, host: &Host, item: &str, action: &str, outcome: &str) {
    tracing::info!("{action} {item}: {outcome}");
    if let Some(s) = state.as_mut() {
        s.record(Record {
            uptime_ms: state::uptime(host).as_millis() as u64,
            unix: state::unix_now(),
            item: item.to_string(),
            action: action.to_string(),
            outcome: outcome.to_string(),
        });
    }
}

fn save(store: &Option<Store>, state: &Option<State>) -> Result<(), String> {
    match (store, state) {
        (Some(store), Some(state)) => store.save(state).map_err(|e| {
            tracing::warn!("cannot save the state file: {e}");
            e
        }),
        _ => Err("no state file".into()),
    }
}

async fn gate(
    host: &Host,
    settings: &Settings,
    cd: &ContainerdConfig,
    mode: Mode,
    command: &str,
) -> Gate {
    let t = target(settings, cd);
    let started = Instant::now();
    let deadline = started
        + if mode.hold {
            settings.hold.timeout
        } else {
            Duration::ZERO
        };
    let knobs = Knobs {
        require_network: settings.hold.require_network,
    };
    let mut rem = Remedies {
        findings: Vec::new(),
    };

    // The budget lives in the state file; only a repairing run loads (and may rewrite) it.
    let store = match Store::new(host, &settings.state_dir) {
        Ok(s) => Some(s),
        Err(e) => {
            rem.set(
                Finding::warn(
                    "remedy.budget",
                    "cannot identify this boot; no restart will be tried",
                )
                .evidence(e),
            );
            None
        }
    };
    let mut state: Option<State> = None;
    if let Some(store) = &store {
        if mode.repair {
            let (s, how) = store.load();
            if let Loaded::Corrupt { problem, kept } = &how {
                rem.set(
                    Finding::warn(
                        "remedy.budget",
                        "the state file was corrupt: no restart budget left this boot",
                    )
                    .evidence(problem.clone())
                    .evidence(format!("kept as {}", kept.display()))
                    .remedy("inspect it, then `guard reset` to allow restarts again"),
                );
            }
            state = Some(s);
        } else if let Ok(text) = std::fs::read(store.path()) {
            match serde_json::from_slice::<State>(&text) {
                Ok(s) if s.boot_id == store.boot_id && s.terminal.is_some() => rem.set(
                    Finding::warn("remedy.budget", "the guard is terminal for this boot")
                        .evidence(s.terminal.map(|t| t.reason).unwrap_or_default())
                        .remedy("fix the cause, then `guard reset`"),
                ),
                Ok(_) => {}
                Err(e) => rem.set(
                    Finding::warn(
                        "remedy.budget",
                        "the state file is corrupt (no restart budget left this boot)",
                    )
                    .evidence(format!("{}: {e}", store.path().display())),
                ),
            }
        }
    }
    let terminal_at_start = state.as_ref().and_then(|s| s.terminal.clone());

    let wait = if mode.repair {
        settings.containerd.wait
    } else {
        settings.containerd.wait.min(VERIFY_WAIT)
    };
    let wanted = normalize_ref(&t.image_ref);
    let socket_on_host = host.path(&t.socket);
    let mut archives_tried = false;
    let mut pulled = false;
    let mut poll = Duration::from_millis(200);
    let mut end;
    let mut findings;
    loop {
        crate::notify::status("checking containerd");
        // Waiting for containerd to answer never outlasts the hold (but gets at least 1 s).
        let this_wait = if mode.hold {
            wait.min(deadline.saturating_duration_since(Instant::now()))
                .max(Duration::from_secs(1))
        } else {
            wait
        };
        let (facts, conn) = probe::gather(host, &t, this_wait).await;
        let (f, plan) = evaluate(&knobs, &facts);
        findings = f;
        // Terminal is sticky for the boot: checks are shown, nothing is done, exit 4.
        if let Some(t) = &terminal_at_start {
            rem.set(
                Finding::fail(
                    "remedy.budget",
                    "TERMINAL: the guard will not act again this boot",
                )
                .evidence(t.reason.clone())
                .remedy("fix the cause, then run `guard reset` (or reboot)"),
            );
            end = End::Terminal;
            break;
        }
        let first_failure = findings
            .iter()
            .find(|f| f.status == Status::Fail)
            .map(|f| format!("{}: {}", f.id, f.summary));
        let Some(failure) = first_failure else {
            end = End::Usable;
            break;
        };
        end = End::Unusable;
        if !mode.repair {
            break;
        }
        let mut acted = false;
        if let Some(reason) = plan.restart {
            // A containerd that phase 1 held back this boot is down on purpose: restarting
            // it would only run the failing volume check again and spend the budget.
            if let Some(held) =
                read_volume_record(host, &settings.state_dir).and_then(|v| v.held_by())
            {
                rem.set(
                    Finding::fail(
                        "remedy.restart",
                        "not restarting containerd: phase 1 held it back this boot",
                    )
                    .evidence(held)
                    .remedy(
                        "fix the volume (`guard status` says how), then `systemctl start containerd`",
                    ),
                );
                record(
                    &mut state,
                    host,
                    "containerd",
                    "restart",
                    "refused: phase 1 failed this boot",
                );
                break;
            }
            let now_up = state::uptime(host);
            let decision = match &state {
                Some(s) => budget::decide(&settings.remediation, s, now_up),
                None => Decision::Terminal {
                    reason: "no state file: cannot count restarts".into(),
                },
            };
            match decision {
                Decision::Terminal { reason: why } => {
                    let mut f = Finding::fail("remedy.budget", "TERMINAL: restart budget spent; containerd will not be restarted again this boot")
                        .evidence(why.clone())
                        .remedy("find out why restarts do not help (see the history in `guard status`), fix it, then `guard reset`");
                    if let Some(s) = &state {
                        for r in s.restarts.iter() {
                            f = f.evidence(format!(
                                "restart at uptime {}s: {}",
                                r.uptime_ms / 1000,
                                r.outcome
                            ));
                        }
                    }
                    tracing::error!("TERMINAL: {why}");
                    if let Some(s) = state.as_mut() {
                        s.terminal = Some(state::Terminal {
                            unix: state::unix_now(),
                            reason: why,
                        });
                    }
                    rem.set(f);
                    end = End::Terminal;
                    break;
                }
                Decision::Wait { left, attempt } => {
                    let msg = format!(
                        "restart {attempt} of {} allowed in {} (backoff)",
                        settings.remediation.restart_budget,
                        format_duration(Duration::from_millis(left.as_millis() as u64))
                    );
                    if mode.hold && Instant::now() + left < deadline {
                        crate::notify::status(&format!("holding: {failure}; {msg}"));
                        crate::notify::extend_timeout(left + Duration::from_secs(30));
                        tracing::info!("{msg}");
                        tokio::time::sleep(left).await;
                        continue;
                    }
                    rem.set(
                        Finding::fail(
                            "remedy.budget",
                            format!("containerd needs a restart but {msg}"),
                        )
                        .remedy("wait, or run the guard again later; it will not restart sooner"),
                    );
                    break;
                }
                Decision::Allowed { attempt } => {
                    if reason == RestartReason::Stale {
                        let tasks = match &conn {
                            Some(c) => probe::running_tasks(c).await,
                            None => Ok(Vec::new()),
                        };
                        let blocking = match tasks {
                            Ok(t) => t
                                .into_iter()
                                .map(|t| format!("{}/{} (pid {})", t.namespace, t.id, t.pid))
                                .collect::<Vec<_>>(),
                            Err(e) => vec![format!("cannot list tasks: {e}")],
                        };
                        if !blocking.is_empty() && !mode.force {
                            let mut f = Finding::fail("remedy.restart", format!("refused to restart the stale containerd: it still runs {} task(s)", blocking.len()))
                                .remedy("a restarted containerd would orphan them: drain the node, stop them, or rerun with --force");
                            for b in &blocking {
                                f = f.evidence(b.clone());
                            }
                            record(
                                &mut state,
                                host,
                                "containerd",
                                "refused-restart",
                                &format!("running tasks: {}", blocking.join(", ")),
                            );
                            rem.set(f);
                            break;
                        }
                    }
                    let why = match reason {
                        RestartReason::Stale => "stale",
                        RestartReason::NotAnswering => "not answering",
                    };
                    crate::notify::status(&format!(
                        "restarting containerd ({why}), attempt {attempt} of {}",
                        settings.remediation.restart_budget
                    ));
                    crate::notify::extend_timeout(
                        RESTART_COMMAND_TIMEOUT + settings.containerd.wait,
                    );
                    let old_pid = crate::runtime::client::peer_pid(&socket_on_host).ok();
                    // Counted before it runs: a crash mid-restart must not refund the budget.
                    record(
                        &mut state,
                        host,
                        "containerd",
                        "restart",
                        &format!("{why}: running `{}`", settings.containerd.restart.join(" ")),
                    );
                    // A restart the state file does not remember would not count against
                    // the budget: without a durable record, do not restart at all.
                    if let Err(e) = save(&store, &state) {
                        rem.set(
                            Finding::fail(
                                "remedy.budget",
                                "refused to restart containerd: the restart cannot be recorded",
                            )
                            .evidence(e)
                            .remedy(
                                "make state_dir writable (it is /run/containerd-guard by default)",
                            ),
                        );
                        break;
                    }
                    let outcome =
                        act::run_argv(&settings.containerd.restart, RESTART_COMMAND_TIMEOUT).await;
                    let text = match &outcome {
                        Ok(t) | Err(t) => t.clone(),
                    };
                    if let Some(s) = state.as_mut() {
                        if let Some(last) = s.restarts.last_mut() {
                            last.outcome = format!("{why}: {text}");
                        }
                        if let Some(last) = s.history.last_mut() {
                            last.outcome = format!("{why}: {text}");
                        }
                    }
                    let _ = save(&store, &state);
                    let f = match outcome {
                        Ok(_) => Finding::pass(
                            "remedy.restart",
                            format!(
                                "restarted containerd ({why}), restart {attempt} of {} this boot",
                                settings.remediation.restart_budget
                            ),
                        ),
                        Err(_) => Finding::warn(
                            "remedy.restart",
                            format!(
                                "the restart command failed (restart {attempt} of {} this boot)",
                                settings.remediation.restart_budget
                            ),
                        ),
                    };
                    rem.set(f.evidence(text).evidence(format!(
                        "containerd pid before: {}",
                        old_pid.map(|p| p.to_string()).unwrap_or("none".into())
                    )));
                    acted = true;
                }
            }
        } else if plan.restore_image {
            let conn = conn.expect("an image plan implies an answering containerd");
            let mut restored = false;
            if !archives_tried {
                archives_tried = true;
                let mut tried = Vec::new();
                for a in &settings.sandbox.archives {
                    let on_host = host.path(a);
                    if !on_host.is_file() {
                        tried.push(format!("{}: not there", a.display()));
                        continue;
                    }
                    crate::notify::status(&format!("importing {} from {}", wanted, a.display()));
                    match act::import_archive(
                        &conn,
                        &socket_on_host,
                        &on_host,
                        &wanted,
                        &t.snapshotter,
                        settings.sandbox.pull_timeout,
                    )
                    .await
                    {
                        Import::Imported(text) => {
                            record(&mut state, host, &a.display().to_string(), "import", &text);
                            tried.push(text);
                            restored = true;
                            break;
                        }
                        Import::Refused(why) => {
                            record(
                                &mut state,
                                host,
                                &a.display().to_string(),
                                "refused-archive",
                                &why,
                            );
                            tried.push(format!("REFUSED (digest verification failed): {why}"));
                        }
                        Import::Failed(why) => {
                            record(
                                &mut state,
                                host,
                                &a.display().to_string(),
                                "import",
                                &format!("failed: {why}"),
                            );
                            tried.push(format!("import failed: {why}"));
                        }
                    }
                }
                let mut f = if restored {
                    Finding::pass(
                        "remedy.restore-image",
                        format!("restored {wanted} from an archive"),
                    )
                } else if settings.sandbox.archives.is_empty() {
                    Finding::skip("remedy.restore-image", "no [sandbox] archives configured")
                } else {
                    Finding::warn(
                        "remedy.restore-image",
                        format!("no archive restored {wanted}"),
                    )
                    .remedy("replace the archive with a good copy of the sandbox image")
                };
                for line in tried {
                    f = f.evidence(line);
                }
                rem.set(f);
                let _ = save(&store, &state);
            }
            if !restored && settings.sandbox.pull && !pulled {
                pulled = true;
                let mut errors = Vec::new();
                let mut pause = Duration::from_secs(1);
                for attempt in 1..=settings.sandbox.pull_attempts {
                    crate::notify::status(&format!(
                        "pulling {} through CRI, attempt {attempt} of {}",
                        t.image_ref, settings.sandbox.pull_attempts
                    ));
                    crate::notify::extend_timeout(
                        settings.sandbox.pull_timeout + Duration::from_secs(30),
                    );
                    match act::pull(&conn, &t.image_ref, settings.sandbox.pull_timeout).await {
                        Ok(text) => {
                            record(&mut state, host, &t.image_ref, "pull", &text);
                            rem.set(Finding::pass("remedy.pull", text));
                            restored = true;
                            break;
                        }
                        Err(e) => {
                            record(
                                &mut state,
                                host,
                                &t.image_ref,
                                "pull",
                                &format!("attempt {attempt}: {e}"),
                            );
                            errors.push(format!("attempt {attempt}: {e}"));
                        }
                    }
                    if attempt < settings.sandbox.pull_attempts {
                        let left = deadline.saturating_duration_since(Instant::now());
                        if mode.hold && left.is_zero() {
                            break;
                        }
                        tokio::time::sleep(pause.min(left.max(Duration::from_millis(100)))).await;
                        pause = (pause * 2).min(Duration::from_secs(10));
                    }
                }
                if !restored {
                    let mut f = Finding::warn("remedy.pull", format!("could not pull {} through CRI", t.image_ref))
                        .remedy("check the registry and containerd's registry configuration, or ship the image as an archive");
                    for e in errors {
                        f = f.evidence(e);
                    }
                    rem.set(f);
                }
                let _ = save(&store, &state);
            }
            acted = restored;
        }
        if acted {
            continue;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if !mode.hold || left.is_zero() {
            if mode.hold {
                rem.set(
                    Finding::fail(
                        "runtime.hold",
                        format!(
                            "the node did not become usable within {}",
                            format_duration(settings.hold.timeout)
                        ),
                    )
                    .evidence(failure),
                );
            }
            break;
        }
        crate::notify::status(&format!(
            "holding kubelet: {failure} ({}s left)",
            left.as_secs()
        ));
        crate::notify::extend_timeout(poll.min(left) + Duration::from_secs(30));
        tokio::time::sleep(poll.min(left)).await;
        poll = (poll * 2).min(Duration::from_secs(5));
    }
    findings.extend(rem.findings);
    if mode.repair {
        let summary = match end {
            End::Usable => "usable".to_string(),
            End::Terminal => {
                "TERMINAL: restart budget spent; `guard reset` after fixing".to_string()
            }
            End::Unusable => findings
                .iter()
                .find(|f| f.status == Status::Fail)
                .map(|f| format!("NOT usable: {}: {}", f.id, f.summary))
                .unwrap_or_default(),
        };
        if let Some(s) = state.as_mut() {
            s.last = Some(Outcome {
                unix: state::unix_now(),
                command: command.to_string(),
                exit: match end {
                    End::Usable => 0,
                    End::Unusable => 1,
                    End::Terminal => 4,
                },
                summary: summary.clone(),
            });
        }
        let _ = save(&store, &state);
        if let Some(store) = &store {
            let _ = store.write_status(&format!("{command}: {summary}"));
        }
        crate::notify::status(&summary);
    }
    Gate { findings, end }
}
