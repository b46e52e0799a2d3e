//! A chaos boot's fault schedule, drawn from a seed as the shell drew it (so that a seed
//! printed by an earlier run replays the same boots).

/// bash's $RANDOM (5.2, variables.c): Park-Miller "minimal standard" steps, folded to 15
/// bits, never the same value twice in a row. Kept so that a seed printed by the shell
/// port draws the same schedules here.
pub struct BashRandom {
    seed: u32,
    last: u32,
}

impl BashRandom {
    pub fn new(seed: u64) -> Self {
        BashRandom {
            seed: seed as u32,
            last: 0,
        }
    }

    fn step(&mut self) -> u32 {
        let ret = if self.seed == 0 {
            123_459_876u32
        } else {
            self.seed
        };
        let h = (ret / 127_773) as i64;
        let l = ret as i64 - 127_773 * h;
        let t = 16_807 * l - 2_836 * h;
        self.seed = if t < 0 {
            (t + 0x7fff_ffff) as u32
        } else {
            t as u32
        };
        ((self.seed >> 16) ^ (self.seed & 65_535)) & 32_767
    }

    pub fn draw(&mut self) -> u32 {
        // bounded: two equal values in a row are rare, a run of them impossible
        let mut rv = self.step();
        for _ in 0..8 {
            if rv != self.last {
                break;
            }
            rv = self.step();
        }
        self.last = rv;
        rv
    }
}

/// One boot's drawn faults.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// never, boot or hotplug
    pub disk: &'static str,
    pub delay: u32,
    pub kick: &'static str,
    /// present, missing or corrupt
    pub archive: &'static str,
    /// the uptime of containerd's SIGKILL, or "never"
    pub kill: String,
    pub standin: &'static str,
}

impl Schedule {
    /// Every value is drawn, in a fixed order, used or not.
    pub fn draw(seed: u64) -> Schedule {
        let mut r = BashRandom::new(seed);
        let disk = match r.draw() % 6 {
            0 => "never",
            1 => "boot",
            _ => "hotplug",
        };
        let delay = r.draw() % 31;
        let kick = if r.draw().is_multiple_of(2) {
            "no"
        } else {
            "yes"
        };
        let archive = match r.draw() % 4 {
            0 | 1 => "present",
            2 => "missing",
            _ => "corrupt",
        };
        let mut kill = (10 + r.draw() % 81).to_string();
        if r.draw().is_multiple_of(4) {
            kill = "never".into();
        }
        let standin = if r.draw().is_multiple_of(2) {
            "once"
        } else {
            "loop"
        };
        Schedule {
            disk,
            delay,
            kick,
            archive,
            kill,
            standin,
        }
    }

    /// The schedule as printed with the result.
    pub fn describe(&self) -> String {
        let disk = if self.disk == "hotplug" {
            format!("hotplug after {}s", self.delay)
        } else {
            self.disk.into()
        };
        let kill = if self.kill == "never" {
            "never".into()
        } else {
            format!("at {}s", self.kill)
        };
        format!(
            "disk {disk}, kick {}, archive {}, kill containerd {kill}, stand-in {}",
            self.kick, self.archive, self.standin
        )
    }

    /// The kernel command line the guest's generator turns into units.
    pub fn append(&self) -> String {
        let mut a = format!(
            "vmtest.scenario=chaos vmtest.devtimeout=45 vmtest.guardwait=20 vmtest.hold=30 vmtest.archive={} vmtest.kick={} vmtest.kill_containerd_at={} vmtest.standin={}",
            self.archive, self.kick, self.kill, self.standin
        );
        if self.disk == "hotplug" {
            a.push_str(" vmtest.hotplug=yes");
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values bash 5.2 printed for `RANDOM=S; echo $RANDOM ...`.
    #[test]
    fn draws_as_bash() {
        let seq = |s, n| {
            let mut r = BashRandom::new(s);
            (0..n).map(|_| r.draw()).collect::<Vec<_>>()
        };
        assert_eq!(
            seq(123, 7),
            [2850, 18229, 29919, 27802, 26708, 27001, 17766]
        );
        assert_eq!(seq(0, 2), [20814, 24386]);
        assert_eq!(seq(99999, 3), [21652, 10185, 29830]);
    }

    /// Schedules the shell's chaos_draw drew (bash 5.2), seed by seed.
    #[test]
    fn schedules_as_the_shell_drew_them() {
        let d = |s| {
            let c = Schedule::draw(s);
            format!(
                "{} {} {} {} {} {}",
                c.disk, c.delay, c.kick, c.archive, c.kill, c.standin
            )
        };
        assert_eq!(d(0), "never 20 yes corrupt 56 loop");
        assert_eq!(d(1), "boot 3 no corrupt 64 loop");
        assert_eq!(d(77), "hotplug 10 yes present 88 once");
        assert_eq!(d(2240), "hotplug 28 no present never once");
        assert_eq!(d(31337), "boot 10 no present 78 once");
        assert_eq!(d(99999), "hotplug 17 no present 48 once");
    }
}
