//! The `guard` binary: parse the command line, run one subcommand, exit with its code.

fn main() {
    std::process::exit(containerd_guard::cli::main());
}
