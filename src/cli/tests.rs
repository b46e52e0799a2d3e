//! The command line's own rules: its definition, the help of each command.

use super::*;
use clap::CommandFactory;

#[test]
fn command_line_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn each_subcommand_maps_to_the_command_of_its_name() {
    use crate::command::Command as Kind;
    let names: Vec<String> = command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    assert_eq!(names, Kind::ALL.map(|k| k.as_str()));
    for kind in Kind::ALL {
        let extra: &[&str] = match kind {
            Kind::Lint => &["--root", "/"],
            Kind::Completion => &["bash"],
            _ => &[],
        };
        let cli = Cli::try_parse_from([&["guard", kind.as_str()][..], extra].concat());
        assert_eq!(cli.unwrap().command.kind(), kind);
    }
}

#[test]
fn help_documents_every_exit_code_and_fits_a_terminal() {
    let help = command().render_long_help().to_string();
    for exit in Exit::ALL {
        let listed = format!("  {}  ", exit.code());
        assert!(
            help.lines().any(|l| l.starts_with(&listed)),
            "help lacks exit code {exit:?}:\n{help}"
        );
    }
    let mut cmd = command();
    let subcommands: Vec<String> = cmd
        .get_subcommands_mut()
        .map(|sub| sub.render_long_help().to_string())
        .collect();
    for help in [help].iter().chain(&subcommands) {
        for line in help.lines() {
            assert!(line.chars().count() <= 100, "help line too wide: {line:?}");
        }
    }
}
