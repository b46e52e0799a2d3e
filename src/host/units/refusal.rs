//! A service unit systemd refuses to load (`service_verify()` in its `service.c`): then
//! the service never starts, whatever its settings say, and a check that read them as if
//! it would would pass a node that cannot run. The reasons are systemd 252's own words.

use super::Unit;

impl Unit {
    /// Why systemd refuses this service, in its words; `None` when it loads it (or it is
    /// no service).
    pub fn refusal(&self) -> Option<String> {
        if !self.name.ends_with(".service") || self.masked {
            return None;
        }
        let oneshot = self
            .setting("Service", "Type")
            .is_some_and(|t| t.value == "oneshot");
        let starts = self.list("Service", "ExecStart");
        let stops = self.list("Service", "ExecStop");
        let success = self.setting("Service", "SuccessAction").is_some();
        let remain = self
            .setting("Service", "RemainAfterExit")
            .is_some_and(|r| matches!(r.value.as_str(), "yes" | "true" | "1" | "on"));
        let why = match () {
            _ if starts.is_empty() && stops.is_empty() && !success => {
                "Service has no ExecStart=, ExecStop=, or SuccessAction=. Refusing."
            }
            _ if starts.is_empty() && !success && !remain => {
                "Service has no ExecStart= and no SuccessAction= settings and does not have \
                 RemainAfterExit=yes set. Refusing."
            }
            _ if starts.len() > 1 && !oneshot => {
                "Service has more than one ExecStart= setting, which is only allowed for \
                 Type=oneshot services. Refusing."
            }
            _ => return None,
        };
        let places: Vec<String> = starts.iter().map(|a| a.place()).collect();
        Some(match places.is_empty() {
            true => format!("{}: {why}", self.name),
            false => format!("{}: {why} (ExecStart= at {})", self.name, places.join(", ")),
        })
    }
}
