//! The `import-unleash` command's flags: where Unleash is, with which token, what to do with
//! the bundle, and the store (the same flags as the server's).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::{SecretString, StoreSettings};

/// A one-off command of the `flagpole` binary.
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Moves a running Unleash 4.0–7.x into the store in one commit, then compares the client
    /// documents of both for every environment and migrated client token (docs/migration.md).
    ImportUnleash(ImportUnleashArgs),
}

/// The flags of `flagpole import-unleash`.
#[derive(Debug, Clone, Args)]
pub struct ImportUnleashArgs {
    /// Unleash's base URL (what SDKs are given, less `/api`), e.g. https://unleash.example.
    #[arg(long, env = "FLAGPOLE_UNLEASH_URL")]
    pub url: String,

    /// An admin token of that Unleash (an `*:*.…` admin API token, or a personal access token
    /// of an admin).
    #[arg(long, env = "FLAGPOLE_UNLEASH_TOKEN", hide_env_values = true, value_parser = parse_secret)]
    pub token: SecretString,

    /// Write nothing: print what would change against the store's current content.
    #[arg(long, default_value_t = false)]
    pub dry_run: bool,

    /// Write the bundle (a version-2 state document, holding token secrets) to this file
    /// instead of committing it; `POST /api/admin/state/import` and `--import-file` take it.
    #[arg(long)]
    pub out: Option<PathBuf>,

    /// Skip the comparison of Unleash's and Flagpole's client documents after committing.
    #[arg(long, default_value_t = false)]
    pub no_verify: bool,

    /// No progress line on a terminal.
    #[arg(long, default_value_t = false)]
    pub quiet: bool,

    /// The store to move into (the server's flags).
    #[command(flatten)]
    pub store: StoreSettings,
}

fn parse_secret(value: &str) -> Result<SecretString, std::convert::Infallible> {
    Ok(SecretString(value.trim().to_string()))
}
