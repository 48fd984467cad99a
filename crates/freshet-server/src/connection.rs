//! One client connection after startup: the message loop and the simple query protocol.
//!
//! Messages are handled one at a time, in order. The extended protocol's messages live in
//! [`crate::extended`], result streaming in [`crate::results`], COPY in [`crate::copy`].
//!
//! INVARIANTS
//! - After an error in an extended-protocol message, every message up to the next Sync is
//!   discarded (`skipping`), then ReadyForQuery reports the transaction state. A simple Query
//!   always ends with exactly one ReadyForQuery.
//! - The connection is "busy" for cancellation from the moment a message is read until it
//!   would wait for the client again (see [`crate::cancel`]).
//! - CopyData, CopyDone and CopyFail outside COPY are ignored: they are what a client still
//!   sends after its COPY failed.
//! - Notifications (LISTEN) are written only between transactions: before ReadyForQuery when
//!   the session is idle, and while an idle session waits for the client, as they arrive.

use std::sync::Arc;

use freshet::{Prepared, Session, StatementResult, Value};
use hashbrown::HashMap;

use crate::backend;
use crate::cancel::{CancelSignal, Registration};
use crate::error::{codes, ConnError, SqlError};
use crate::extended::{Portal, PreparedStatement};
use crate::message::Message;
use crate::results::Started;
use crate::wire::Wire;

/// What the loop does after a message.
pub enum Flow {
    Continue,
    Stop,
}

pub struct Connection<'a> {
    pub wire: &'a mut Wire,
    pub session: Session,
    pub cancel: Arc<CancelSignal>,
    /// Keeps the connection reachable by CancelRequest while it lives.
    _registration: Registration,
    /// Named statements and portals, hashed with foldhash (hashbrown's default) rather than
    /// SipHash: every Bind looks up a statement and replaces a portal, and every Execute takes
    /// its portal out and puts it back, five hashes of a short name per statement.
    pub statements: HashMap<String, Arc<PreparedStatement>>,
    pub portals: HashMap<String, Portal>,
    /// Discarding messages until Sync after an error.
    pub skipping: bool,
}

impl<'a> Connection<'a> {
    pub fn new(wire: &'a mut Wire, session: Session, registration: Registration) -> Self {
        let cancel = registration.signal.clone();
        Connection {
            wire,
            session,
            cancel,
            _registration: registration,
            statements: HashMap::new(),
            portals: HashMap::new(),
            skipping: false,
        }
    }

    /// Handles messages until the client terminates or disconnects.
    pub async fn run(&mut self) -> Result<(), ConnError> {
        let inbox = self.session.notification_inbox();
        loop {
            if !self.wire.has_message() {
                self.cancel.set_busy(false);
            }
            let message = if self.wire.has_message() || self.session.transaction_status() != freshet::TransactionStatus::Idle {
                self.wire.read_message().await?
            } else {
                // Idle: notifications are sent as they arrive while the client is quiet.
                loop {
                    tokio::select! {
                        m = self.wire.read_message() => break m?,
                        () = inbox.arrived() => {
                            self.write_notifications();
                            self.wire.flush().await?;
                        }
                    }
                }
            };
            let Some((tag, body)) = message else { return Ok(()) };
            self.cancel.set_busy(true);
            let message = Message::decode(tag, body)?;
            if self.skipping && !matches!(message, Message::Sync | Message::Terminate) {
                continue;
            }
            if let Flow::Stop = self.dispatch(message).await? {
                return Ok(());
            }
        }
    }

    /// The futures of statement work are boxed: planning and execution futures are large
    /// (especially in debug builds), and kept inline they would make every frame of this
    /// loop large enough to overflow a runtime thread's stack.
    async fn dispatch(&mut self, message: Message) -> Result<Flow, ConnError> {
        match message {
            Message::Query(sql) => Box::pin(self.simple_query(&sql)).await?,
            Message::Parse { name, sql, param_oids } => {
                let r = Box::pin(self.parse(name, sql, &param_oids)).await;
                self.extended(r)?
            }
            Message::Bind(bind) => {
                let r = self.bind(bind);
                self.extended(r)?
            }
            Message::Describe { target, name } => {
                let r = self.describe(target, &name);
                self.extended(r)?
            }
            Message::Execute { portal, max_rows } => {
                let r = Box::pin(self.execute(portal, max_rows)).await;
                self.extended(r)?
            }
            Message::Close { target, name } => self.close(target, &name),
            Message::Sync => self.sync().await?,
            Message::Flush => self.wire.flush().await?,
            Message::Terminate => return Ok(Flow::Stop),
            Message::CopyData(_) | Message::CopyDone | Message::CopyFail(_) => {}
            Message::FunctionCall => {
                let e = SqlError::new(codes::FEATURE_NOT_SUPPORTED, "the function call protocol is not supported");
                backend::error_response(&mut self.wire.out, &e);
                self.ready_for_query().await?;
            }
        }
        Ok(Flow::Continue)
    }

    /// Reports a statement error of an extended-protocol message and starts skipping to Sync.
    fn extended(&mut self, r: Result<(), ConnError>) -> Result<(), ConnError> {
        match r {
            Err(ConnError::Sql(e)) => {
                self.failed_notices();
                backend::error_response(&mut self.wire.out, &e);
                // An error anywhere in a transaction block fails the block (25P02 until
                // ROLLBACK), also one raised while rows were streaming.
                self.session.statement_failed();
                self.skipping = true;
                Ok(())
            }
            other => other,
        }
    }

    async fn sync(&mut self) -> Result<(), ConnError> {
        self.skipping = false;
        if self.session.transaction_status() == freshet::TransactionStatus::Idle {
            // Portals live until the end of the transaction; outside a block that is now.
            self.portals.clear();
        }
        self.ready_for_query().await
    }

    /// The notices a failed call sent before its error (they precede the ErrorResponse).
    fn failed_notices(&mut self) {
        for notice in self.session.take_failed_notices() {
            backend::notice(&mut self.wire.out, &notice);
        }
    }

    /// NotificationResponse for each notification the session has received.
    fn write_notifications(&mut self) {
        for n in self.session.notifications() {
            backend::notification_response(&mut self.wire.out, n.process_id, &n.channel, &n.payload);
        }
    }

    pub async fn ready_for_query(&mut self) -> Result<(), ConnError> {
        if self.session.transaction_status() == freshet::TransactionStatus::Idle {
            self.write_notifications();
        }
        let status = backend::transaction_byte(self.session.transaction_status());
        backend::ready_for_query(&mut self.wire.out, status);
        self.wire.flush().await
    }

    /// A simple Query: its statements one at a time, results in text, stopping at the first
    /// error, then ReadyForQuery.
    async fn simple_query(&mut self, sql: &str) -> Result<(), ConnError> {
        self.statements.remove("");
        self.portals.remove("");
        match self.run_statements(sql).await {
            Err(ConnError::Sql(e)) => {
                self.failed_notices();
                backend::error_response(&mut self.wire.out, &e);
                self.session.statement_failed();
            }
            Err(other) => return Err(other),
            Ok(()) => {}
        }
        self.ready_for_query().await
    }

    async fn run_statements(&mut self, sql: &str) -> Result<(), ConnError> {
        let statements = self.session.parse(sql)?;
        if statements.is_empty() {
            backend::empty_query_response(&mut self.wire.out);
            return Ok(());
        }
        for statement in statements {
            let prepare = Box::pin(self.session.prepare_statement(statement, sql, &[]));
            let prepared = self.cancel.race(prepare, freshet::Error::canceled).await?;
            let result = self.execute_prepared(&prepared, vec![]).await?;
            self.side_messages(&result);
            if let Started::Rows(mut cursor) = self.start_output(result.output, None).await? {
                backend::row_description(&mut self.wire.out, cursor.encoder.columns(), cursor.encoder.formats());
                let (sent, _) = self.send_rows(&mut cursor, 0).await?;
                backend::command_complete(&mut self.wire.out, &format!("{} {sent}", cursor.verb));
            }
            self.wire.flush_if_large().await?;
        }
        Ok(())
    }

    /// Executes a prepared statement. Statements that return rows only read, so a cancel
    /// request may drop them; writes run to completion (see [`crate::cancel`]).
    pub async fn execute_prepared(&mut self, prepared: &Arc<Prepared>, params: Vec<Value>) -> Result<StatementResult, ConnError> {
        let run = Box::pin(self.session.execute(prepared, params));
        let result = if prepared.returns_rows() { self.cancel.race(run, freshet::Error::canceled).await } else { run.await };
        Ok(result?)
    }

    /// NoticeResponse and ParameterStatus messages a statement produced.
    pub fn side_messages(&mut self, result: &StatementResult) {
        for notice in &result.notices {
            backend::notice(&mut self.wire.out, notice);
        }
        for (name, value) in &result.parameter_status {
            backend::parameter_status(&mut self.wire.out, name, value);
        }
    }
}
