//! Connection startup: SSL/GSS negotiation, CancelRequest, StartupMessage.
//!
//! Freshet speaks protocol 3.0 without encryption: SSLRequest and GSSENCRequest are answered
//! 'N' and the client continues in plain text. Authentication is trust: any user name and
//! database name are accepted without a password. Startup parameters that are run-time
//! settings are applied to the session; unknown or invalid ones are ignored, except a
//! client_encoding other than UTF8, which ends the connection as in PostgreSQL.

use bytes::Bytes;
use freshet::Session;

use crate::backend;
use crate::cancel::{BackendKey, Registration};
use crate::error::{codes, ConnError, SqlError};
use crate::message::Reader;
use crate::wire::Wire;
use crate::Shared;

const SSL_REQUEST: i32 = 80_877_103;
const GSSENC_REQUEST: i32 = 80_877_104;
const CANCEL_REQUEST: i32 = 80_877_102;

/// A session that completed startup.
pub struct Started {
    pub session: Session,
    pub registration: Registration,
}

/// Runs startup; `None` if the connection was a CancelRequest or closed early.
pub async fn handshake(wire: &mut Wire, shared: &Shared) -> Result<Option<Started>, ConnError> {
    loop {
        let Some(body) = wire.read_startup().await? else { return Ok(None) };
        let mut r = Reader::new(body.clone());
        match r.i32()? {
            SSL_REQUEST | GSSENC_REQUEST => {
                if wire.has_buffered_input() {
                    // Bytes sent before the answer could not have been encrypted: refuse them.
                    return Err(ConnError::protocol("received unencrypted data after encryption request"));
                }
                wire.write_byte(b'N').await?;
            }
            CANCEL_REQUEST => {
                let key = BackendKey { pid: r.i32()?, secret: r.i32()? };
                shared.cancels.cancel(key);
                return Ok(None);
            }
            version if version >> 16 == 3 => return start(wire, shared, version, body).await.map(Some),
            version => {
                let message = format!(
                    "unsupported frontend protocol {}.{}: server supports 3.0 to 3.0",
                    version >> 16,
                    version & 0xffff
                );
                return Err(SqlError::fatal(codes::FEATURE_NOT_SUPPORTED, message).into());
            }
        }
    }
}

/// Handles a v3 StartupMessage: settings, AuthenticationOk, ParameterStatus, BackendKeyData.
async fn start(wire: &mut Wire, shared: &Shared, version: i32, body: Bytes) -> Result<Started, ConnError> {
    let params = startup_params(body)?;
    let mut session = shared.db.session();
    let unrecognized = apply_params(&mut session, &params)?;
    let out = &mut wire.out;
    if version & 0xffff != 0 || !unrecognized.is_empty() {
        backend::negotiate_protocol_version(out, 0, &unrecognized);
    }
    backend::authentication_ok(out);
    for (name, value) in session.settings().reported() {
        backend::parameter_status(out, &name, &value);
    }
    let (key, registration) = shared.cancels.register(session.id() as i32);
    backend::backend_key_data(out, key.pid, key.secret);
    backend::ready_for_query(out, backend::transaction_byte(session.transaction_status()));
    wire.flush().await?;
    Ok(Started { session, registration })
}

/// The name/value pairs of a StartupMessage body (after the version word).
fn startup_params(body: Bytes) -> Result<Vec<(String, String)>, ConnError> {
    let mut r = Reader::new(body);
    r.i32()?;
    let mut params = Vec::new();
    loop {
        let name = r.string()?;
        if name.is_empty() {
            break;
        }
        params.push((name, r.string()?));
    }
    r.finish()?;
    Ok(params)
}

/// Applies startup parameters; returns the protocol options (`_pq_.*`) not understood.
fn apply_params(session: &mut Session, params: &[(String, String)]) -> Result<Vec<String>, ConnError> {
    let mut unrecognized = Vec::new();
    for (name, value) in params {
        match name.as_str() {
            "database" | "replication" => {}
            "user" => set_quietly(session, "session_authorization", value),
            "options" => {
                for (n, v) in command_line_options(value) {
                    set_quietly(session, &n, &v);
                }
            }
            "client_encoding" => {
                if let Err(e) = session.settings_mut().set(name, value) {
                    return Err(SqlError { severity: crate::error::Severity::Fatal, ..SqlError::from(e) }.into());
                }
            }
            n if n.starts_with("_pq_.") => unrecognized.push(n.to_string()),
            n => set_quietly(session, n, value),
        }
    }
    Ok(unrecognized)
}

fn set_quietly(session: &mut Session, name: &str, value: &str) {
    if let Err(e) = session.settings_mut().set(name, value) {
        tracing::debug!(name, value, error = %e, "startup parameter ignored");
    }
}

/// `-c name=value` and `--name=value` settings from the `options` startup parameter
/// (backslash escapes a space).
fn command_line_options(options: &str) -> Vec<(String, String)> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut chars = options.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => word.extend(chars.next()),
            c if c.is_whitespace() => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    let mut out = Vec::new();
    let mut iter = words.into_iter();
    while let Some(w) = iter.next() {
        let setting = if w == "-c" { iter.next() } else { w.strip_prefix("-c").or_else(|| w.strip_prefix("--")).map(str::to_string) };
        if let Some((n, v)) = setting.as_deref().and_then(|s| s.split_once('=')) {
            out.push((n.replace('-', "_"), v.to_string()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parameter() {
        let got = command_line_options("-c search_path=public --application-name=my\\ app -cDateStyle=ISO junk");
        assert_eq!(
            got,
            vec![
                ("search_path".to_string(), "public".to_string()),
                ("application_name".to_string(), "my app".to_string()),
                ("DateStyle".to_string(), "ISO".to_string()),
            ]
        );
    }
}
