//! Backend messages: encoding what the server sends.
//!
//! Each function appends one complete message to the write buffer. A message is written as
//! type byte, a length placeholder, the body, then the length is patched in, so a message in
//! the buffer is always whole: flushing can never send half of one.

use bytes::{BufMut, BytesMut};
use freshet::ColumnInfo;

use crate::error::{Severity, SqlError};

/// Transaction status in ReadyForQuery.
pub fn transaction_byte(status: freshet::TransactionStatus) -> u8 {
    match status {
        freshet::TransactionStatus::Idle => b'I',
        freshet::TransactionStatus::InBlock => b'T',
        freshet::TransactionStatus::Failed => b'E',
    }
}

/// Starts a message; returns where its length goes.
pub fn begin(out: &mut BytesMut, tag: u8) -> usize {
    out.put_u8(tag);
    let at = out.len();
    out.put_i32(0);
    at
}

/// Patches the length of the message started at `at`.
pub fn finish(out: &mut BytesMut, at: usize) {
    let len = (out.len() - at) as i32;
    out[at..at + 4].copy_from_slice(&len.to_be_bytes());
}

/// A NUL-terminated string; NUL bytes inside are dropped so they cannot end it early.
pub fn put_cstr(out: &mut BytesMut, s: &str) {
    if s.as_bytes().contains(&0) {
        out.extend(s.bytes().filter(|&b| b != 0));
    } else {
        out.put_slice(s.as_bytes());
    }
    out.put_u8(0);
}

fn empty(out: &mut BytesMut, tag: u8) {
    let at = begin(out, tag);
    finish(out, at);
}

pub fn authentication_ok(out: &mut BytesMut) {
    let at = begin(out, b'R');
    out.put_i32(0);
    finish(out, at);
}

pub fn parameter_status(out: &mut BytesMut, name: &str, value: &str) {
    let at = begin(out, b'S');
    put_cstr(out, name);
    put_cstr(out, value);
    finish(out, at);
}

pub fn backend_key_data(out: &mut BytesMut, pid: i32, secret: i32) {
    let at = begin(out, b'K');
    out.put_i32(pid);
    out.put_i32(secret);
    finish(out, at);
}

/// NegotiateProtocolVersion: the newest 3.x minor version supported and the options ignored.
pub fn negotiate_protocol_version(out: &mut BytesMut, minor: i32, unrecognized: &[String]) {
    let at = begin(out, b'v');
    out.put_i32(minor);
    out.put_i32(unrecognized.len() as i32);
    for option in unrecognized {
        put_cstr(out, option);
    }
    finish(out, at);
}

/// NotificationResponse: a notification on a channel the session listens on.
pub fn notification_response(out: &mut BytesMut, process_id: u32, channel: &str, payload: &str) {
    let at = begin(out, b'A');
    out.put_i32(process_id as i32);
    put_cstr(out, channel);
    put_cstr(out, payload);
    finish(out, at);
}

pub fn ready_for_query(out: &mut BytesMut, status: u8) {
    let at = begin(out, b'Z');
    out.put_u8(status);
    finish(out, at);
}

/// ErrorResponse, or NoticeResponse for severity NOTICE.
pub fn error_response(out: &mut BytesMut, e: &SqlError) {
    let tag = if matches!(e.severity, Severity::Notice(_)) { b'N' } else { b'E' };
    let at = begin(out, tag);
    let field = |out: &mut BytesMut, code: u8, value: &str| {
        out.put_u8(code);
        put_cstr(out, value);
    };
    field(out, b'S', e.severity.as_str());
    field(out, b'V', e.severity.as_str());
    field(out, b'C', e.code);
    field(out, b'M', &e.message);
    if let Some(d) = &e.detail {
        field(out, b'D', d);
    }
    if let Some(h) = &e.hint {
        field(out, b'H', h);
    }
    if let Some(p) = e.position {
        field(out, b'P', &p.to_string());
    }
    if let Some(w) = &e.context {
        field(out, b'W', w);
    }
    out.put_u8(0);
    finish(out, at);
}

pub fn notice(out: &mut BytesMut, notice: &freshet::Notice) {
    error_response(out, &SqlError::notice(notice));
}

/// RowDescription; `formats[i]` is the format code of column `i` (0 text, 1 binary).
pub fn row_description(out: &mut BytesMut, columns: &[ColumnInfo], formats: &[i16]) {
    let at = begin(out, b'T');
    out.put_i16(columns.len() as i16);
    for (i, c) in columns.iter().enumerate() {
        put_cstr(out, &c.name);
        out.put_i32(0); // table OID
        out.put_i16(0); // attribute number
        out.put_u32(c.ty.oid());
        out.put_i16(c.ty.type_len());
        out.put_i32(c.ty.typmod());
        out.put_i16(formats.get(i).copied().unwrap_or(0));
    }
    finish(out, at);
}

pub fn parameter_description(out: &mut BytesMut, oids: &[u32]) {
    let at = begin(out, b't');
    out.put_i16(oids.len() as i16);
    for &oid in oids {
        out.put_u32(oid);
    }
    finish(out, at);
}

pub fn command_complete(out: &mut BytesMut, tag: &str) {
    let at = begin(out, b'C');
    put_cstr(out, tag);
    finish(out, at);
}

pub fn empty_query_response(out: &mut BytesMut) {
    empty(out, b'I');
}

pub fn parse_complete(out: &mut BytesMut) {
    empty(out, b'1');
}

pub fn bind_complete(out: &mut BytesMut) {
    empty(out, b'2');
}

pub fn close_complete(out: &mut BytesMut) {
    empty(out, b'3');
}

pub fn no_data(out: &mut BytesMut) {
    empty(out, b'n');
}

pub fn portal_suspended(out: &mut BytesMut) {
    empty(out, b's');
}

/// CopyInResponse ('G') or CopyOutResponse ('H'), text format for every column.
pub fn copy_response(out: &mut BytesMut, tag: u8, columns: usize) {
    let at = begin(out, tag);
    out.put_u8(0);
    out.put_i16(columns as i16);
    for _ in 0..columns {
        out.put_i16(0);
    }
    finish(out, at);
}

pub fn copy_data(out: &mut BytesMut, data: &[u8]) {
    let at = begin(out, b'd');
    out.put_slice(data);
    finish(out, at);
}

pub fn copy_done(out: &mut BytesMut) {
    empty(out, b'c');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_patched() {
        let mut out = BytesMut::new();
        command_complete(&mut out, "SELECT 1");
        assert_eq!(&out[..], b"C\0\0\0\x0dSELECT 1\0");
        let mut out = BytesMut::new();
        ready_for_query(&mut out, b'I');
        assert_eq!(&out[..], b"Z\0\0\0\x05I");
    }

    #[test]
    fn nul_inside_a_string_is_dropped() {
        let mut out = BytesMut::new();
        put_cstr(&mut out, "a\0b");
        assert_eq!(&out[..], b"ab\0");
    }
}
