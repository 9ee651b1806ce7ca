//! `scout-quest-mcp`: the example MCP server of assay's conversation simulator.
//!
//! `init` loads a fixture into a fresh SQLite database, `serve` speaks MCP over stdio (stdout is
//! the protocol, logs go to stderr), `dump` prints the quest state JSON.

mod fixture;
mod server;
mod store;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use chrono::NaiveDate;
use clap::{Parser, Subcommand};
use rmcp::ServiceExt;

use crate::fixture::Fixture;
use crate::server::{Hooks, ScoutServer, to_json};
use crate::store::{Store, StoreError};

#[derive(Parser)]
#[command(
    name = "scout-quest-mcp",
    version,
    about = "A scout's quest tracker, served over MCP"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create the database from a fixture (replacing any old file).
    Init {
        #[arg(long)]
        db: PathBuf,
        #[arg(long)]
        fixture: PathBuf,
    },
    /// Serve the database over MCP on stdin/stdout.
    Serve {
        #[arg(long)]
        db: PathBuf,
    },
    /// Print the quest state JSON (as the get_quest_state tool returns it).
    Dump {
        #[arg(long)]
        db: PathBuf,
    },
}

/// Why a command failed: bad input exits 2, anything else 1.
enum Failure {
    BadInput(String),
    Other(anyhow::Error),
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Failure {
        match e {
            StoreError::Rule(m) => Failure::BadInput(m),
            e => Failure::Other(e.into()),
        }
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::BadInput(message)) => {
            eprintln!("scout-quest-mcp: {message}");
            ExitCode::from(2)
        }
        Err(Failure::Other(e)) => {
            eprintln!("scout-quest-mcp: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), Failure> {
    let today = today().map_err(Failure::BadInput)?;
    match cli.command {
        Command::Init { db, fixture } => {
            let fixture = Fixture::load(&fixture).map_err(|e| Failure::BadInput(e.to_string()))?;
            Store::create(&db, &fixture, today)?;
            eprintln!("scout-quest-mcp: created {}", db.display());
        }
        Command::Dump { db } => println!("{}", to_json(&Store::open(&db, today)?.quest_state()?)),
        Command::Serve { db } => {
            let store = Store::open(&db, today)?;
            let hooks = Hooks::from_env().map_err(Failure::BadInput)?;
            serve(ScoutServer::new(store, hooks)).map_err(Failure::Other)?;
        }
    }
    Ok(())
}

fn serve(server: ScoutServer) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let service = server
            .serve(rmcp::transport::stdio())
            .await
            .context("MCP handshake failed")?;
        service.waiting().await.context("MCP service stopped")?;
        anyhow::Ok(())
    })
}

/// Today's date: `SCOUT_QUEST_TODAY=YYYY-MM-DD` when set (reproducible tests), else local time.
fn today() -> Result<NaiveDate, String> {
    match std::env::var("SCOUT_QUEST_TODAY") {
        Ok(v) => NaiveDate::parse_from_str(v.trim(), "%Y-%m-%d")
            .map_err(|_| format!("SCOUT_QUEST_TODAY must be a YYYY-MM-DD date, got `{v}`")),
        Err(_) => Ok(chrono::Local::now().date_naive()),
    }
}
