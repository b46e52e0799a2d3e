//! `guard config`: the effective configuration and where each value came from.

use super::{Context, Exit};

pub fn run(ctx: &Context) -> Exit {
    if ctx.json {
        let value = crate::config::describe_json(&ctx.loaded);
        println!(
            "{}",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        );
    } else {
        print!("{}", crate::config::describe(&ctx.loaded));
    }
    Exit::Usable
}
