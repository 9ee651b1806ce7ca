//! The connection target: the URL checked, the user and the password found (see the
//! module documentation of [`super`]).

use std::path::{Path, PathBuf};
use std::str::FromStr;

use tokio_postgres::Config;
use tokio_postgres::config::Host;

use super::CONNECT_TIMEOUT;
use crate::KbError;
/// Whether `store` names a PostgreSQL database (`postgres://…` or `postgresql://…`).
pub fn is_postgres_url(store: &str) -> bool {
    let lower = store.trim().to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// A connection target, parsed and checked: no password in it, the user filled in, the password
/// looked up from `PGPASSWORD` or the pgpass file. `env` reads the environment.
pub fn connection_config(
    url: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, KbError> {
    let mut config = Config::from_str(url.trim()).map_err(|e| {
        KbError::Invalid(format!(
            "the store `{}` is not a PostgreSQL URL: {e}",
            redact(url)
        ))
    })?;
    if config.get_password().is_some() {
        return Err(KbError::Invalid(format!(
            "the store URL `{}` contains a password: remove it, and give the password in \
             PGPASSWORD or a pgpass file (~/.pgpass or PGPASSFILE) instead",
            redact(url)
        )));
    }
    if config.get_user().is_none() {
        let user = env("PGUSER").or_else(|| env("USER")).ok_or_else(|| {
            KbError::Invalid(format!(
                "the store URL `{}` names no user: write postgres://USER@host/db or set PGUSER",
                redact(url)
            ))
        })?;
        config.user(user);
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_application_name().is_none() {
        config.application_name("assay");
    }
    if let Some(password) = env("PGPASSWORD").filter(|p| !p.is_empty()) {
        config.password(password);
    } else if let Some(password) = pgpass_lookup(&config, env) {
        config.password(password);
    }
    Ok(config)
}

/// `url` with any password replaced by `***`, for messages.
fn redact(url: &str) -> String {
    let url = url.trim();
    let Some((scheme, rest)) = url.split_once("://") else {
        // A key-value string: hide the value of `password=`.
        return url
            .split_whitespace()
            .map(|part| {
                if part.to_ascii_lowercase().starts_with("password=") {
                    "password=***"
                } else {
                    part
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or_default();
            let masked = if userinfo.contains(':') { ":***" } else { "" };
            format!("{scheme}://{user}{masked}@{host}{tail}")
        }
        None => url.to_owned(),
    }
}

/// How a target reads in messages: `postgres://user@host:port/db`, never with a password.
pub(super) fn describe(config: &Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(name)) => name.clone(),
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or_default();
    let db = config.get_dbname().unwrap_or(user);
    format!("postgres://{user}@{host}:{port}/{db}")
}

/// The password for `config` from the pgpass file (`PGPASSFILE`, else `~/.pgpass`), as libpq
/// finds it: the first line whose host, port, database and user match (`*` matches anything).
fn pgpass_lookup(config: &Config, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let path = match env("PGPASSFILE") {
        Some(path) => PathBuf::from(path),
        None => Path::new(&env("HOME")?).join(".pgpass"),
    };
    let text = std::fs::read_to_string(&path).ok()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(&path)
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(
                path = %path.display(),
                "the password file is readable by others and is ignored (chmod 600 it)"
            );
            return None;
        }
    }
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(name)) => name.clone(),
        Some(Host::Unix(_)) | None => "localhost".to_owned(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config.get_user().unwrap_or_default().to_owned();
    let db = config.get_dbname().unwrap_or(&user).to_owned();
    pgpass_find(&text, [&host, &port, &db, &user])
}

/// The password of the first pgpass line matching `want` (host, port, database, user).
fn pgpass_find(text: &str, want: [&str; 4]) -> Option<String> {
    for line in text.lines() {
        if line.trim_start().starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let fields = pgpass_fields(line);
        if fields.len() != 5 {
            continue;
        }
        if fields[..4]
            .iter()
            .zip(want)
            .all(|(field, want)| field == "*" || field == want)
        {
            return Some(fields[4].clone());
        }
    }
    None
}

/// The colon-separated fields of a pgpass line (`\:` and `\\` escape).
fn pgpass_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next()
                    && let Some(f) = fields.last_mut()
                {
                    f.push(next);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            _ => {
                if let Some(f) = fields.last_mut() {
                    f.push(c);
                }
            }
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn a_password_in_the_url_is_refused_and_never_shown() {
        let err = connection_config("postgres://ann:s3cret@db.example:5433/kb", &env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("contains a password"), "{err}");
        assert!(err.contains("PGPASSWORD"), "{err}");
        assert!(
            err.contains("postgres://ann:***@db.example:5433/kb"),
            "{err}"
        );
        assert!(!err.contains("s3cret"), "{err}");
        let err = connection_config("host=db user=ann password=s3cret", &env(&[]))
            .unwrap_err()
            .to_string();
        assert!(
            !err.contains("s3cret") && err.contains("password=***"),
            "{err}"
        );
    }

    #[test]
    fn the_password_comes_from_the_environment_and_the_user_has_a_default() {
        let config = connection_config(
            "postgres://db.example/kb",
            &env(&[("PGPASSWORD", "pw"), ("USER", "ann")]),
        )
        .unwrap();
        assert_eq!(config.get_user(), Some("ann"));
        assert_eq!(config.get_password(), Some(&b"pw"[..]));
        assert_eq!(describe(&config), "postgres://ann@db.example:5432/kb");
        let err = connection_config("postgres://db.example/kb", &env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("names no user"), "{err}");
    }

    #[test]
    fn pgpass_lines_match_like_libpq() {
        let text = "# comment\n\
                    other:5432:kb:ann:wrong\n\
                    db.example:5433:*:ann:first\\:part\n\
                    *:*:*:*:fallback\n";
        assert_eq!(
            pgpass_find(text, ["db.example", "5433", "kb", "ann"]).as_deref(),
            Some("first:part")
        );
        assert_eq!(
            pgpass_find(text, ["db.example", "5432", "kb", "bob"]).as_deref(),
            Some("fallback")
        );
        assert_eq!(pgpass_find("a:b:c:d", ["a", "b", "c", "d"]), None);
    }

    #[test]
    fn a_pgpass_file_readable_by_others_is_ignored() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pgpass");
        std::fs::write(&path, "*:*:*:*:secret\n").unwrap();
        let path_text = path.to_str().unwrap().to_owned();
        let vars = [("PGPASSFILE", path_text.as_str()), ("USER", "ann")];
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let config = connection_config("postgres://h/kb", &env(&vars)).unwrap();
        assert_eq!(config.get_password(), None);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let config = connection_config("postgres://h/kb", &env(&vars)).unwrap();
        assert_eq!(config.get_password(), Some(&b"secret"[..]));
    }

    #[test]
    fn postgres_urls_are_recognised() {
        assert!(is_postgres_url("postgres://h/db"));
        assert!(is_postgres_url(" PostgreSQL://h/db"));
        assert!(!is_postgres_url(".assay/kb.db"));
    }
}
