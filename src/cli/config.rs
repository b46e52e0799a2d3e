//! `guard config`: the effective configuration and where each value came from.

use super::{Context, Exit};
use crate::config::Inherited;

pub fn run(ctx: &Context) -> Exit {
    // What the keys the guard takes from containerd and kubelet while unset are now.
    let named = &ctx.loaded.settings.containerd.config;
    let inherited = Inherited {
        containerd: ctx
            .containerd_config()
            .map(|cd| cd.for_the_guard(named))
            .map_err(|e| e.to_string()),
        kubelet_config: crate::host::kubelet::node_flags(&ctx.host)
            .get("config")
            .cloned(),
    };
    if ctx.json {
        let value = crate::config::describe_json(&ctx.loaded, &inherited);
        println!(
            "{}",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        );
    } else {
        print!("{}", crate::config::describe(&ctx.loaded, &inherited));
    }
    Exit::Usable
}
