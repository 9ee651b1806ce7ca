//! `assay serve`

use std::path::PathBuf;

use assay_project::HarnessError;
use assay_project::project::Project;
use assay_server::AppState;
use assay_server::project::Contents;
use clap::Args;

use super::{log_warnings, out, runtime};
use crate::exit::Exit;

/// `assay serve`
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The project directory (as `--project`).
    #[arg(value_name = "DIR", conflicts_with = "project")]
    pub dir: Option<PathBuf>,

    /// The project directory.
    #[arg(long, default_value = ".", value_name = "DIR")]
    pub project: PathBuf,

    /// The port to listen on (0: any free port).
    #[arg(long, default_value_t = 8000, value_name = "N")]
    pub port: u16,

    /// The address to bind. Anything but localhost exposes an API without authentication.
    #[arg(long, default_value = "127.0.0.1", value_name = "HOST")]
    pub host: String,

    /// Seconds a connection may take to send a request's headers (from its start or its
    /// previous answer) before it is closed.
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    pub header_timeout: f64,

    /// Seconds a request body may send nothing before the request fails (408).
    #[arg(long, default_value_t = 30.0, value_name = "SECONDS")]
    pub body_timeout: f64,

    /// Connections served at once; more wait in the operating system's queue.
    #[arg(long, default_value_t = 512, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub max_connections: u32,
}

impl ServeArgs {
    /// The project: the positional `DIR`, else `--project`.
    pub fn project(&self) -> &std::path::Path {
        self.dir.as_deref().unwrap_or(&self.project)
    }
}

fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Resolves on Ctrl-C (and SIGTERM on Unix).
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!("cannot listen for Ctrl-C: {e}");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutting down: finishing the requests in flight");
}

pub fn run(args: &ServeArgs) -> anyhow::Result<Exit> {
    // A folder is served whatever it holds (test banks, a knowledge base, runs, experiments,
    // simulation reports, or none yet). What it has is read now, so a bad file stops here
    // (exit 2) before anything listens: test banks load as `assay run` loads them, a
    // knowledge base without them as the pages read it.
    let dir = args.project();
    let contents = Contents::survey(dir, &|name| std::env::var(name).ok())?;
    if contents.test_banks {
        log_warnings(&Project::load(dir)?.warnings);
    } else if contents.kb {
        log_warnings(&assay_server::project::load(dir)?.warnings);
    }
    // Export is set up for the server's life; each run or calibration it makes is a trace.
    if super::otel::install(dir)? {
        tracing::info!("telemetry: each run and calibration is exported as a trace");
    }
    tracing::info!(project = %dir.display(), "serving {}", contents.describe());
    if !contents.test_banks {
        tracing::info!(
            "no test banks: the pages show what the folder holds; running, testing a case or a topic and calibrating over HTTP answer 422 until it has them (`assay init` makes a project with test banks)"
        );
    }

    if !is_loopback(&args.host) {
        tracing::warn!(
            "binding {}: the harness API has no authentication; anyone who can reach this address can run, calibrate and read the knowledge base and saved runs (only KB writes need the admin token)",
            args.host
        );
    }
    let seconds = |v: f64, flag: &str| {
        std::time::Duration::try_from_secs_f64(v)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| HarnessError::Usage(format!("{flag}: must be more than 0 seconds")))
    };
    let limits = assay_server::Limits {
        header_timeout: seconds(args.header_timeout, "--header-timeout")?,
        body_timeout: seconds(args.body_timeout, "--body-timeout")?,
        max_connections: args.max_connections as usize,
    };
    let state = AppState::new(args.project());
    runtime()?.block_on(async {
        let host = args.host.trim_start_matches('[').trim_end_matches(']');
        let listener = tokio::net::TcpListener::bind((host, args.port))
            .await
            .map_err(|e| {
                HarnessError::Infrastructure(format!(
                    "cannot listen on {}:{}: {e}",
                    args.host, args.port
                ))
            })?;
        let addr = listener.local_addr()?;
        let url = format!("http://{addr}");
        tracing::info!(project = %args.project().display(), "listening on {url}");
        out(&format!("{url}\n"));
        assay_server::serve_with(listener, state, limits, shutdown_signal()).await?;
        anyhow::Ok(())
    })?;
    Ok(Exit::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for h in ["127.0.0.1", "localhost", "::1", "[::1]", "127.1.2.3"] {
            assert!(is_loopback(h), "{h}");
        }
        for h in ["0.0.0.0", "192.168.1.2", "example.com", "::"] {
            assert!(!is_loopback(h), "{h}");
        }
    }
}
