//! Frontend messages: decoding what a client sends after startup.
//!
//! Every field is bounds-checked: a truncated field, a count that does not match the data,
//! bytes left over at the end, or a name that is not UTF-8 is a protocol violation
//! ([`ConnError::Protocol`]), never a panic. Bodies are `Bytes` cut from the read buffer, so
//! parameter values are slices of it, not copies.

use bytes::Bytes;

use crate::error::ConnError;

/// Largest message a client may send (PostgreSQL's limit for any message).
pub const MAX_MESSAGE_LEN: usize = 1 << 30;

/// Which object a Describe or Close names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Statement,
    Portal,
}

/// The fields of a Bind message.
#[derive(Debug)]
pub struct Bind {
    pub portal: String,
    pub statement: String,
    pub param_formats: Vec<i16>,
    /// Parameter values; `None` is NULL (length −1).
    pub params: Vec<Option<Bytes>>,
    pub result_formats: Vec<i16>,
}

/// A decoded frontend message.
#[derive(Debug)]
pub enum Message {
    Query(String),
    Parse { name: String, sql: String, param_oids: Vec<u32> },
    Bind(Bind),
    Describe { target: Target, name: String },
    Execute { portal: String, max_rows: i32 },
    Close { target: Target, name: String },
    Sync,
    Flush,
    Terminate,
    CopyData(Bytes),
    CopyDone,
    CopyFail(String),
    FunctionCall,
}

impl Message {
    /// Decodes the body of a message of type `tag`.
    pub fn decode(tag: u8, body: Bytes) -> Result<Message, ConnError> {
        let mut r = Reader::new(body);
        let message = match tag {
            b'Q' => Message::Query(r.string()?),
            b'P' => decode_parse(&mut r)?,
            b'B' => Message::Bind(decode_bind(&mut r)?),
            b'D' => Message::Describe { target: r.target()?, name: r.string()? },
            b'E' => Message::Execute { portal: r.string()?, max_rows: r.i32()? },
            b'C' => Message::Close { target: r.target()?, name: r.string()? },
            b'S' => Message::Sync,
            b'H' => Message::Flush,
            b'X' => Message::Terminate,
            b'd' => return Ok(Message::CopyData(r.rest())),
            b'c' => Message::CopyDone,
            b'f' => Message::CopyFail(r.string()?),
            b'F' => return Ok(Message::FunctionCall),
            other => return Err(ConnError::protocol(format!("invalid frontend message type {other}"))),
        };
        r.finish()?;
        Ok(message)
    }
}

fn decode_parse(r: &mut Reader) -> Result<Message, ConnError> {
    let name = r.string()?;
    let sql = r.string()?;
    let count = r.count()?;
    let mut param_oids = Vec::with_capacity(count);
    for _ in 0..count {
        param_oids.push(r.i32()? as u32);
    }
    Ok(Message::Parse { name, sql, param_oids })
}

fn decode_bind(r: &mut Reader) -> Result<Bind, ConnError> {
    let portal = r.string()?;
    let statement = r.string()?;
    let param_formats = r.formats()?;
    let count = r.count()?;
    let mut params = Vec::with_capacity(count);
    for _ in 0..count {
        let len = r.i32()?;
        params.push(match len {
            -1 => None,
            n if n < 0 => return Err(ConnError::protocol(format!("invalid parameter length {n}"))),
            n => Some(r.bytes(n as usize)?),
        });
    }
    let result_formats = r.formats()?;
    Ok(Bind { portal, statement, param_formats, params, result_formats })
}

/// Reads fields from a message body.
pub struct Reader {
    buf: Bytes,
    pos: usize,
}

impl Reader {
    pub fn new(buf: Bytes) -> Self {
        Reader { buf, pos: 0 }
    }

    fn take(&mut self, n: usize) -> Result<&[u8], ConnError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len()).ok_or_else(truncated)?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    pub fn u8(&mut self) -> Result<u8, ConnError> {
        Ok(self.take(1)?[0])
    }

    pub fn i16(&mut self) -> Result<i16, ConnError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    pub fn i32(&mut self) -> Result<i32, ConnError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A non-negative Int16 count.
    fn count(&mut self) -> Result<usize, ConnError> {
        let n = self.i16()?;
        usize::try_from(n).map_err(|_| ConnError::protocol(format!("invalid count {n}")))
    }

    fn formats(&mut self) -> Result<Vec<i16>, ConnError> {
        let count = self.count()?;
        (0..count).map(|_| self.i16()).collect()
    }

    fn target(&mut self) -> Result<Target, ConnError> {
        match self.u8()? {
            b'S' => Ok(Target::Statement),
            b'P' => Ok(Target::Portal),
            other => Err(ConnError::protocol(format!("invalid DESCRIBE/CLOSE message subtype {other}"))),
        }
    }

    /// `n` bytes as a slice of the message.
    pub fn bytes(&mut self, n: usize) -> Result<Bytes, ConnError> {
        let start = self.pos;
        self.take(n)?;
        Ok(self.buf.slice(start..self.pos))
    }

    fn rest(&mut self) -> Bytes {
        let out = self.buf.slice(self.pos..);
        self.pos = self.buf.len();
        out
    }

    /// A NUL-terminated UTF-8 string.
    pub fn string(&mut self) -> Result<String, ConnError> {
        let rest = &self.buf[self.pos..];
        let len = rest.iter().position(|&b| b == 0).ok_or_else(|| ConnError::protocol("unterminated string in message"))?;
        let s = std::str::from_utf8(&rest[..len])
            .map_err(|_| ConnError::protocol("invalid byte sequence for encoding \"UTF8\""))?
            .to_string();
        self.pos += len + 1;
        Ok(s)
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// Fails if bytes are left over.
    pub fn finish(&self) -> Result<(), ConnError> {
        if self.is_empty() { Ok(()) } else { Err(ConnError::protocol("invalid message format")) }
    }
}

fn truncated() -> ConnError {
    ConnError::protocol("insufficient data left in message")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(parts: &[&[u8]]) -> Bytes {
        Bytes::from(parts.concat())
    }

    #[test]
    fn bind_with_null_and_value() {
        let b = body(&[b"p\0s\0", &1i16.to_be_bytes(), &1i16.to_be_bytes(), &2i16.to_be_bytes(), &(-1i32).to_be_bytes(), &2i32.to_be_bytes(), b"hi", &0i16.to_be_bytes()]);
        let Message::Bind(bind) = Message::decode(b'B', b).unwrap() else { panic!("not a bind") };
        assert_eq!(bind.portal, "p");
        assert_eq!(bind.statement, "s");
        assert_eq!(bind.param_formats, vec![1]);
        assert_eq!(bind.params, vec![None, Some(Bytes::from_static(b"hi"))]);
        assert!(bind.result_formats.is_empty());
    }

    #[test]
    fn malformed_bodies_are_protocol_errors() {
        let cases: Vec<(u8, Bytes)> = vec![
            (b'Q', body(&[b"SELECT 1"])),                                   // no NUL
            (b'Q', body(&[b"SELECT 1\0extra"])),                            // trailing bytes
            (b'Q', body(&[b"\xff\xfe\0"])),                                 // not UTF-8
            (b'E', body(&[b"\0", &[0, 0]])),                                // truncated Int32
            (b'B', body(&[b"\0\0", &[0, 0], &1i16.to_be_bytes(), &100i32.to_be_bytes(), b"x"])), // short value
            (b'B', body(&[b"\0\0", &(-3i16).to_be_bytes()])),              // negative count
            (b'D', body(&[b"Zname\0"])),                                    // bad subtype
            (b'!', body(&[])),                                              // unknown type
        ];
        for (tag, b) in cases {
            assert!(matches!(Message::decode(tag, b.clone()), Err(ConnError::Protocol(_))), "{} {b:?}", tag as char);
        }
    }
}
