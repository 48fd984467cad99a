//! Session settings: SET, SHOW, RESET.
//!
//! Freshet keeps the run-time parameters clients set and read (application_name, DateStyle,
//! TimeZone, extra_float_digits, search_path, …) and its own, under the `freshet.` prefix.
//! Parameters PostgreSQL reports with ParameterStatus are reported when they change.
//! Unknown unqualified names are rejected with 42704, as in PostgreSQL; names with a dot are
//! custom parameters and are accepted.

use std::collections::BTreeMap;

use freshet_core::{Error, Result, SqlState};

/// A documented setting: its default and whether clients are told when it changes.
struct Known {
    name: &'static str,
    default: &'static str,
    reported: bool,
    description: &'static str,
}

const KNOWN: &[Known] = &[
    Known { name: "application_name", default: "", reported: true, description: "Name of the client application." },
    Known { name: "client_encoding", default: "UTF8", reported: true, description: "Client character set; only UTF8." },
    Known { name: "datestyle", default: "ISO, MDY", reported: true, description: "Date output style; only ISO." },
    Known { name: "default_transaction_read_only", default: "off", reported: true, description: "Whether new transactions are read-only." },
    Known { name: "extra_float_digits", default: "1", reported: false, description: "Accepted for compatibility; floats always print in shortest exact form." },
    Known { name: "in_hot_standby", default: "off", reported: true, description: "Whether this server is a standby." },
    Known { name: "integer_datetimes", default: "on", reported: true, description: "Timestamps are 64-bit integers." },
    Known { name: "intervalstyle", default: "postgres", reported: true, description: "Interval output style." },
    Known { name: "is_superuser", default: "on", reported: true, description: "Whether the session user is a superuser." },
    Known { name: "search_path", default: "\"$user\", public", reported: false, description: "Schema search order; tables live in public." },
    Known { name: "server_encoding", default: "UTF8", reported: true, description: "Server character set." },
    Known { name: "server_version", default: crate::SERVER_VERSION, reported: true, description: "PostgreSQL version this server is compatible with." },
    Known { name: "server_version_num", default: "150000", reported: false, description: "Numeric form of server_version." },
    Known { name: "session_authorization", default: "freshet", reported: true, description: "Session user." },
    Known { name: "standard_conforming_strings", default: "on", reported: true, description: "Backslashes are literal in ordinary strings." },
    Known { name: "statement_timeout", default: "0", reported: false, description: "Longest time an analytical query may run before it is cancelled (57014); 0: no limit." },
    Known { name: "lock_timeout", default: "0", reported: false, description: "Longest wait for an advisory lock (pg_advisory_lock and its family) before the statement fails with 55P03; 0: no limit. Row-lock waits (freshet.lock_wait) do not use it." },
    Known { name: "idle_in_transaction_session_timeout", default: "0", reported: false, description: "Accepted; not enforced." },
    Known { name: "timezone", default: "UTC", reported: true, description: "Time zone of the session. Kept and reported, but timestamp with time zone values are read and shown in UTC whatever it is (no time zone database); timestamps without time zone ignore it." },
    Known { name: "transaction_isolation", default: "serializable", reported: false, description: "Isolation level of the current transaction (SHOW only; use SET TRANSACTION)." },
    Known { name: "transaction_read_only", default: "off", reported: false, description: "Whether the current transaction is read-only (SHOW only)." },
    Known { name: "default_transaction_isolation", default: "serializable", reported: false, description: "Isolation level of new transactions: serializable, repeatable read, read committed (read uncommitted behaves as read committed)." },
    Known { name: "max_index_keys", default: "32", reported: false, description: "Maximum columns in an index key." },
    Known { name: "max_identifier_length", default: "63", reported: false, description: "PostgreSQL's identifier length, which drivers and ORMs read (Rails); Freshet keeps longer names whole." },
    Known { name: "client_min_messages", default: "notice", reported: false, description: "Lowest message level sent to the client." },
    Known { name: "synchronous_commit", default: "on", reported: false, description: "on: a commit is acknowledged once its redo record is durable (group commit); off: at once, the record becoming durable within 10 ms (asynchronous commit)." },
    // Settings pg_dump's output sets, accepted so that a dump restores: none changes what
    // Freshet does.
    Known { name: "check_function_bodies", default: "on", reported: false, description: "Accepted; a routine's body is always checked when it is created." },
    Known { name: "xmloption", default: "content", reported: false, description: "Accepted; there is no xml type." },
    Known { name: "row_security", default: "on", reported: false, description: "Accepted; there are no row security policies." },
    Known { name: "default_tablespace", default: "", reported: false, description: "Accepted; there are no tablespaces (data lives in memory and in the data directory)." },
    Known { name: "default_table_access_method", default: "heap", reported: false, description: "Accepted; every table uses Freshet's column storage." },
    Known { name: "default_with_oids", default: "off", reported: false, description: "Accepted; tables have no OID column." },
    Known { name: "escape_string_warning", default: "on", reported: false, description: "Accepted; no warnings about backslashes are given." },
    Known { name: "default_toast_compression", default: "pglz", reported: false, description: "Accepted; values are not compressed." },
    Known { name: "freshet.lock_wait", default: "on", reported: false, description: "on: a write that meets a row another transaction changed and has not committed waits for it to end, then runs again (a wait that would close a cycle fails with 40P01); off: it fails at once with 40001." },
    Known { name: "freshet.max_staleness", default: "0", reported: false, description: "How old a snapshot an analytical query outside a transaction block may read: 0 (every commit acknowledged before the query started) or a duration such as 250ms or 1s. Queries that accept the same staleness share one snapshot." },
    Known { name: "freshet.snapshot_mode", default: "cow", reported: false, description: "How analytical snapshots are taken: cow (copy-on-write of column segments) or fork (a fork()ed child process runs the query on its memory image)." },
    Known { name: "freshet.foreign_keys", default: "refuse", reported: false, description: "What CREATE TABLE does with a FOREIGN KEY constraint, which Freshet does not enforce: refuse (the statement fails with 0A000) or ignore (the table is created without it, with a notice)." },
    Known { name: "freshet.short_path", default: "on", reported: false, description: "on: index-driven SELECTs run on the partition executor; off: every SELECT runs on the analytical side (for comparing the two paths)." },
];

/// Every documented setting: name, built-in default, description (for `pg_settings`).
pub(crate) fn documented() -> impl Iterator<Item = (&'static str, &'static str, &'static str)> {
    KNOWN.iter().map(|k| (k.name, k.default, k.description))
}

fn known(name: &str) -> Option<&'static Known> {
    KNOWN.iter().find(|k| k.name == name)
}

/// A setting's text: the session's value, else the server's default, else the built-in one.
fn lookup(values: &BTreeMap<String, String>, server_defaults: &BTreeMap<String, String>, name: &str) -> Option<String> {
    let name = name.to_lowercase();
    if let Some(v) = values.get(&name).or_else(|| server_defaults.get(&name)) {
        return Some(v.clone());
    }
    known(&name).map(|k| k.default.to_string())
}

/// The settings of one session.
#[derive(Clone, Debug)]
pub struct Settings {
    values: BTreeMap<String, String>,
    /// Defaults the server was started with, in place of the built-in ones (RESET returns
    /// to these).
    server_defaults: BTreeMap<String, String>,
    /// The settings every statement reads, parsed from the texts above.
    hot: Hot,
}

/// The values of the settings each statement or transaction consults, parsed once whenever a
/// setting changes rather than looked up by name on every statement (a lookup lowercases the
/// name, searches two maps and the documented list and copies the text: about 580
/// instructions, three or four times per statement). INVARIANT: `hot` is what
/// [`Hot::parse`] makes of the current `values` and `server_defaults`; every change of them
/// recomputes it.
#[derive(Clone, Copy, Debug)]
struct Hot {
    short_path: bool,
    synchronous_commit: bool,
    lock_wait: bool,
    max_staleness: std::time::Duration,
    snapshot_mode: crate::snapshots::SnapshotMode,
    statement_timeout: Option<std::time::Duration>,
    lock_timeout: Option<std::time::Duration>,
    default_isolation: Option<freshet_core::txn::Isolation>,
    default_read_only: bool,
}

impl Hot {
    fn parse(values: &BTreeMap<String, String>, server_defaults: &BTreeMap<String, String>) -> Hot {
        let get = |name: &str| lookup(values, server_defaults, name);
        let on = |name: &str| get(name).is_none_or(|v| v != "off");
        let duration = |name: &str| get(name).and_then(|v| crate::snapshots::parse_duration(&v));
        Hot {
            short_path: on("freshet.short_path"),
            synchronous_commit: on("synchronous_commit"),
            lock_wait: on("freshet.lock_wait"),
            max_staleness: duration("freshet.max_staleness").unwrap_or_default(),
            snapshot_mode: get("freshet.snapshot_mode").and_then(|v| crate::snapshots::SnapshotMode::parse(&v)).unwrap_or(crate::snapshots::SnapshotMode::Cow),
            statement_timeout: duration("statement_timeout").filter(|d| !d.is_zero()),
            lock_timeout: duration("lock_timeout").filter(|d| !d.is_zero()),
            default_isolation: get("default_transaction_isolation").and_then(|v| freshet_core::txn::Isolation::parse(&v)),
            default_read_only: get("default_transaction_read_only").is_some_and(|v| v == "on"),
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings::with_defaults([])
    }
}

impl Settings {
    /// Settings whose defaults are the built-in ones, except those in `server_defaults`.
    pub fn with_defaults(server_defaults: impl IntoIterator<Item = (String, String)>) -> Self {
        let (values, server_defaults) = (BTreeMap::new(), server_defaults.into_iter().collect());
        let hot = Hot::parse(&values, &server_defaults);
        Settings { values, server_defaults, hot }
    }

    pub fn get(&self, name: &str) -> Option<String> {
        lookup(&self.values, &self.server_defaults, name)
    }

    /// Sets a parameter; returns the ParameterStatus to report, if any.
    pub fn set(&mut self, name: &str, value: &str) -> Result<Option<(String, String)>> {
        let name = name.to_lowercase();
        let value = normalize(&name, value)?;
        let report = match known(&name) {
            Some(k) => k.reported.then(|| (display_name(k.name), value.clone())),
            None if name.contains('.') => None,
            None => {
                return Err(Error::new(
                    SqlState::UndefinedObject,
                    format!("unrecognized configuration parameter \"{name}\""),
                ))
            }
        };
        self.values.insert(name, value);
        self.hot = Hot::parse(&self.values, &self.server_defaults);
        Ok(report)
    }

    pub fn reset(&mut self, name: &str) -> Option<(String, String)> {
        let name = name.to_lowercase();
        self.values.remove(&name);
        self.hot = Hot::parse(&self.values, &self.server_defaults);
        known(&name).filter(|k| k.reported).map(|k| (display_name(k.name), self.get(k.name).unwrap_or_default()))
    }

    pub fn reset_all(&mut self) {
        self.values.clear();
        self.hot = Hot::parse(&self.values, &self.server_defaults);
    }

    /// Every documented parameter with its current value and description (SHOW ALL).
    pub fn all(&self) -> Vec<(String, String, String)> {
        let mut out: Vec<_> = KNOWN
            .iter()
            .map(|k| (display_name(k.name), self.get(k.name).unwrap_or_default(), k.description.to_string()))
            .collect();
        for (name, value) in &self.values {
            if known(name).is_none() {
                out.push((name.clone(), value.clone(), String::new()));
            }
        }
        out
    }

    /// Parameters reported at connection start.
    pub fn reported(&self) -> Vec<(String, String)> {
        KNOWN
            .iter()
            .filter(|k| k.reported)
            .map(|k| (display_name(k.name), self.get(k.name).unwrap_or_default()))
            .collect()
    }

    pub fn short_path(&self) -> bool {
        self.hot.short_path
    }

    pub fn foreign_keys(&self) -> freshet_core::sql::ddl::ForeignKeys {
        match self.get("freshet.foreign_keys").as_deref() {
            Some("ignore") => freshet_core::sql::ddl::ForeignKeys::Ignore,
            _ => freshet_core::sql::ddl::ForeignKeys::Refuse,
        }
    }

    pub fn synchronous_commit(&self) -> bool {
        self.hot.synchronous_commit
    }

    pub fn max_staleness(&self) -> std::time::Duration {
        self.hot.max_staleness
    }

    pub fn snapshot_mode(&self) -> crate::snapshots::SnapshotMode {
        self.hot.snapshot_mode
    }

    /// `statement_timeout`, if one is set.
    pub fn statement_timeout(&self) -> Option<std::time::Duration> {
        self.hot.statement_timeout
    }

    /// `lock_timeout`, if one is set.
    pub fn lock_timeout(&self) -> Option<std::time::Duration> {
        self.hot.lock_timeout
    }

    pub fn lock_wait(&self) -> bool {
        self.hot.lock_wait
    }

    /// `default_transaction_isolation`, if it names a level.
    pub fn default_isolation(&self) -> Option<freshet_core::txn::Isolation> {
        self.hot.default_isolation
    }

    /// Whether `default_transaction_read_only` is on.
    pub fn default_read_only(&self) -> bool {
        self.hot.default_read_only
    }
}

/// PostgreSQL's spelling of a parameter name in ParameterStatus and SHOW ALL.
fn display_name(name: &str) -> String {
    match name {
        "datestyle" => "DateStyle".into(),
        "intervalstyle" => "IntervalStyle".into(),
        "timezone" => "TimeZone".into(),
        other => other.into(),
    }
}

fn normalize(name: &str, value: &str) -> Result<String> {
    let invalid = |hint: &str| {
        Error::new(SqlState::InvalidParameterValue, format!("invalid value for parameter \"{name}\": \"{value}\""))
            .with_hint(hint.to_string())
    };
    Ok(match name {
        "client_encoding" => {
            let v = value.to_uppercase().replace(['-', '_'], "");
            if v != "UTF8" && v != "UNICODE" {
                return Err(invalid("Freshet speaks UTF8 only."));
            }
            "UTF8".into()
        }
        "datestyle" => {
            if !value.to_uppercase().contains("ISO") && !value.to_uppercase().trim().is_empty() {
                return Err(invalid("Only the ISO date style is supported."));
            }
            "ISO, MDY".into()
        }
        "synchronous_commit" => match value.to_lowercase().as_str() {
            "on" | "true" | "1" | "local" | "remote_write" | "remote_apply" => "on".into(),
            "off" | "false" | "0" => "off".into(),
            _ => return Err(invalid("Use on or off.")),
        },
        "freshet.short_path" | "freshet.lock_wait" => match value.to_lowercase().as_str() {
            "on" | "true" | "1" | "auto" => "on".into(),
            "off" | "false" | "0" => "off".into(),
            _ => return Err(invalid("Use on or off.")),
        },
        "freshet.max_staleness" | "statement_timeout" | "lock_timeout" => match crate::snapshots::parse_duration(value) {
            Some(d) => crate::snapshots::format_duration(d),
            None => return Err(crate::snapshots::invalid_duration(name, value)),
        },
        "freshet.snapshot_mode" => match crate::snapshots::SnapshotMode::parse(value) {
            Some(m) => m.name().into(),
            None => return Err(invalid("Use cow or fork.")),
        },
        "freshet.foreign_keys" => match value.to_lowercase().as_str() {
            v @ ("refuse" | "ignore") => v.into(),
            _ => return Err(invalid("Use refuse or ignore.")),
        },
        "default_transaction_read_only" => match value.to_lowercase().as_str() {
            "on" | "true" | "1" => "on".into(),
            "off" | "false" | "0" => "off".into(),
            _ => return Err(invalid("Use on or off.")),
        },
        "transaction_isolation" | "default_transaction_isolation" => {
            let v = value.to_lowercase();
            if !matches!(v.as_str(), "serializable" | "repeatable read" | "read committed" | "read uncommitted") {
                return Err(invalid("Use serializable, repeatable read, read committed or read uncommitted."));
            }
            v
        }
        _ => value.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_show_reset() {
        let mut s = Settings::default();
        assert_eq!(s.get("DateStyle").unwrap(), "ISO, MDY");
        assert_eq!(s.set("application_name", "bench").unwrap(), Some(("application_name".into(), "bench".into())));
        assert_eq!(s.get("application_name").unwrap(), "bench");
        assert_eq!(s.set("no_such_thing", "1").unwrap_err().state, SqlState::UndefinedObject);
        assert!(s.set("myapp.flag", "x").unwrap().is_none());
        assert!(s.set("client_encoding", "LATIN1").is_err());
        s.reset("application_name");
        assert_eq!(s.get("application_name").unwrap(), "");
        assert!(s.short_path());
        s.set("freshet.short_path", "off").unwrap();
        assert!(!s.short_path());
    }

    #[test]
    fn the_parsed_settings_follow_set_reset_and_server_defaults() {
        let mut s = Settings::with_defaults([("synchronous_commit".to_string(), "off".to_string()), ("lock_timeout".to_string(), "2s".to_string())]);
        assert!(!s.synchronous_commit(), "a server default applies");
        assert_eq!(s.lock_timeout(), Some(std::time::Duration::from_secs(2)));
        s.set("SYNCHRONOUS_COMMIT", "on").unwrap();
        assert!(s.synchronous_commit());
        s.reset("synchronous_commit");
        assert!(!s.synchronous_commit(), "RESET returns to the server's default");
        s.set("freshet.lock_wait", "off").unwrap();
        s.set("freshet.max_staleness", "250ms").unwrap();
        s.set("statement_timeout", "1s").unwrap();
        s.set("default_transaction_isolation", "read committed").unwrap();
        s.set("default_transaction_read_only", "on").unwrap();
        assert!(!s.lock_wait());
        assert_eq!(s.max_staleness(), std::time::Duration::from_millis(250));
        assert_eq!(s.statement_timeout(), Some(std::time::Duration::from_secs(1)));
        assert_eq!(s.default_isolation(), Some(freshet_core::txn::Isolation::ReadCommitted));
        assert!(s.default_read_only());
        let copy = s.clone();
        s.reset_all();
        assert!(s.lock_wait() && s.max_staleness().is_zero() && s.statement_timeout().is_none());
        assert_eq!(s.default_isolation(), Some(freshet_core::txn::Isolation::Serializable));
        assert!(!s.default_read_only());
        assert!(!copy.lock_wait(), "a copy keeps its values");
        assert_eq!(Settings::default().default_isolation(), Some(freshet_core::txn::Isolation::Serializable));
    }
}
