//! `gpuscale-generate`: writes every generated file of the repository
//! (`cargo run -p gpuscale-lint`), or with `--check` lists the ones out of
//! date and exits 1.

use std::process::ExitCode;

use gpuscale_lint::generate::{self, COMMAND, Stale};

fn main() -> ExitCode {
    let root = gpuscale_lint::repo_root();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        [] => match generate::write(&root) {
            Ok(changed) => {
                for c in &changed {
                    match c {
                        Stale::Differs(p) => println!("wrote {p}"),
                        Stale::Orphan(p) => println!("removed {p}"),
                    }
                }
                println!("{} generated file(s) changed", changed.len());
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e),
        },
        ["--check"] => match generate::check(&root) {
            Ok(problems) if problems.is_empty() => ExitCode::SUCCESS,
            Ok(problems) => {
                for p in &problems {
                    eprintln!("{p}");
                }
                eprintln!("run: {COMMAND}");
                ExitCode::FAILURE
            }
            Err(e) => fail(&e),
        },
        _ => {
            eprintln!(
                "usage: {COMMAND} [-- --check]\nunknown arguments: {}",
                args.join(" ")
            );
            ExitCode::from(2)
        }
    }
}

fn fail(e: &generate::Error) -> ExitCode {
    eprintln!("gpuscale-generate: {e}");
    ExitCode::from(2)
}
