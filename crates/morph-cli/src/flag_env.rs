//! Every `morph serve` flag is also read from an environment variable, as TEI's launcher reads
//! its flags: `--max-queue` from `MORPH_MAX_QUEUE`, `--runtime` from `MORPH_RUNTIME` (several
//! comma separated). A flag given on the command line wins; one already named (`MORPH_MODEL`,
//! `MORPH_API_KEY`) keeps its name. `serve --help` shows each variable.

use clap::{Arg, ArgAction, Command};

/// The variable a flag is read from: `MORPH_` and its long name in capitals, `-` as `_`.
pub(crate) fn env_name(long: &str) -> String {
    format!("MORPH_{}", long.to_ascii_uppercase().replace('-', "_"))
}

/// `command` with an environment variable on every flag of its `serve` subcommand.
pub(crate) fn serve_flags_from_env(command: Command) -> Command {
    command.mut_subcommand("serve", |serve| serve.mut_args(with_env))
}

fn with_env(arg: Arg) -> Arg {
    let Some(long) = arg.get_long().map(env_name) else { return arg };
    if arg.get_env().is_some() {
        return arg;
    }
    let repeated = matches!(arg.get_action(), ArgAction::Append) && arg.get_value_delimiter().is_none();
    let arg = if repeated { arg.value_delimiter(',') } else { arg };
    arg.env(long)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn every_serve_flag_has_a_variable_and_keeps_a_name_it_had() {
        let command = serve_flags_from_env(crate::Cli::command());
        let serve = command.find_subcommand("serve").expect("serve");
        let flags: Vec<&Arg> = serve.get_arguments().filter(|a| a.get_long().is_some()).collect();
        assert!(flags.len() > 40, "{} flags", flags.len());
        for flag in flags {
            let env = flag.get_env().and_then(|e| e.to_str()).unwrap_or_default();
            assert!(env.starts_with("MORPH_"), "--{} has no variable", flag.get_long().unwrap_or_default());
        }
        let env_of = |long: &str| {
            let arg = serve.get_arguments().find(|a| a.get_long() == Some(long)).expect(long);
            arg.get_env().and_then(|e| e.to_str()).map(str::to_string)
        };
        assert_eq!(env_of("max-queue").as_deref(), Some("MORPH_MAX_QUEUE"));
        assert_eq!(env_of("model").as_deref(), Some("MORPH_MODEL"));
        assert_eq!(env_of("cluster-token-file").as_deref(), Some("MORPH_CLUSTER_TOKEN_FILE"));
        let runtime = serve.get_arguments().find(|a| a.get_long() == Some("runtime")).expect("runtime");
        assert_eq!(runtime.get_value_delimiter(), Some(','), "several runtimes in one variable");
    }
}
