//! What `--user-data` is, as cloud-init decides it from the first line: a cloud config
//! (`#cloud-config`, also below Cluster API's and TKGS's `## template: jinja` line) is
//! read; anything else (a shell script, a MIME multi-part archive, `#include`, a boothook)
//! is not, and the lint says so instead of guessing what it mounts. Pure.

use crate::host::cloud_init::{self, Cloud};

/// The user data as the lint can use it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserData {
    /// A cloud config: what it says, or why it cannot be read.
    Cloud(Result<Cloud, String>),
    /// Not a cloud config: why it is not read.
    NotRead(String),
}

/// cloud-init's marker of a Jinja template (its first line), before `#cloud-config`.
const JINJA: &str = "## template: jinja";

pub fn classify(text: &str) -> UserData {
    let first = |t: &str| t.lines().next().unwrap_or_default().trim_end().to_string();
    let line = first(text);
    if line.eq_ignore_ascii_case(JINJA) {
        let rest = text.split_once('\n').map_or("", |(_, r)| r);
        if !first(rest).starts_with("#cloud-config") {
            return UserData::NotRead(format!(
                "a Jinja template of `{}`, not of #cloud-config",
                first(rest)
            ));
        }
        // the whole text, so that lines keep their numbers (the marker is a YAML comment);
        // an unrendered template need not be YAML yet: not read rather than failed
        return match cloud_init::parse(text) {
            Ok(c) => UserData::Cloud(Ok(c)),
            Err(e) => UserData::NotRead(format!(
                "a Jinja template that is not YAML before cloud-init renders it ({e})"
            )),
        };
    }
    if line.starts_with("#cloud-config") && !line.starts_with("#cloud-config-archive") {
        return UserData::Cloud(cloud_init::parse(text));
    }
    let lower = line.to_ascii_lowercase();
    let what = if line.starts_with("#!") {
        "a script (cloud-init runs it; what it mounts cannot be known without running it)"
            .to_string()
    } else if lower.starts_with("content-type:") || lower.starts_with("mime-version:") {
        "a MIME multi-part archive (its parts are not read)".to_string()
    } else {
        format!(
            "not #cloud-config (first line `{}`)",
            line.chars().take(60).collect::<String>()
        )
    };
    UserData::NotRead(what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_lines_decide_as_cloud_init_decides() {
        let cloud = |t: &str| matches!(classify(t), UserData::Cloud(Ok(_)));
        assert!(cloud("#cloud-config\nmounts: []\n"));
        assert!(cloud(
            "## template: jinja\n#cloud-config\nhostname: '{{ v1.local_hostname }}'\n"
        ));
        let UserData::Cloud(Ok(c)) = classify(
            "## template: jinja\n#cloud-config\nmounts:\n  - [LABEL=x, /var/lib/containerd]\n",
        ) else {
            panic!("a jinja cloud config is read");
        };
        assert_eq!(c.mounts[0].1, 4, "lines counted from the file's first");
        for (text, says) in [
            (
                "#!/bin/sh\nmount /dev/sdb /var/lib/containerd\n",
                "a script",
            ),
            ("Content-Type: multipart/mixed; boundary=x\n", "MIME"),
            ("MIME-Version: 1.0\n", "MIME"),
            ("#include\nhttps://example.invalid/ud\n", "#include"),
            (
                "#cloud-config-archive\n- type: text/x-shellscript\n",
                "#cloud-config-archive",
            ),
            (
                "## template: jinja\n#!/bin/sh\n",
                "Jinja template of `#!/bin/sh`",
            ),
            (
                "## template: jinja\n#cloud-config\nx: {{ a }}.b\n",
                "not YAML",
            ),
            ("", "not #cloud-config"),
        ] {
            match classify(text) {
                UserData::NotRead(why) => assert!(why.contains(says), "{text:?}: {why}"),
                other => panic!("{text:?} was read: {other:?}"),
            }
        }
        assert!(matches!(
            classify("#cloud-config\nmounts: [unclosed\n"),
            UserData::Cloud(Err(_))
        ));
    }
}
