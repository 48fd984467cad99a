//! LISTEN, NOTIFY and `pg_notify`: messages between sessions, delivered when the sending
//! transaction commits (job queues and caches use them to wake their workers).
//!
//! The database has one [`Channels`] registry: channel name → the inboxes of the sessions
//! listening on it. A session's notifications wait in its [`SessionNotify`] until its
//! transaction ends: a commit (or a statement outside a block that succeeds) sends them, in
//! order and without duplicates (the same channel and payload twice in one transaction is sent
//! once, as PostgreSQL does); a rollback drops them. LISTEN and UNLISTEN wait the same way
//! and take effect at the commit, before its notifications are sent (so a session that listens
//! and notifies in one transaction receives its own notification); a rolled-back one changes
//! nothing. ROLLBACK TO a savepoint drops what was queued after it ([`SessionNotify::mark`]).
//! Each listening session's [`Inbox`] keeps
//! what arrived until the session takes it: the server writes NotificationResponse messages
//! when the session is between transactions (also while it waits for the client), an embedded
//! program calls `Session::notifications`.
//!
//! Invariants: a session is in a channel's listener list exactly while it listens (LISTEN adds
//! it, UNLISTEN and the session's end remove it); notifications reach the inboxes of the
//! sessions listening at the moment of the commit, the sender's own included.

use std::collections::VecDeque;
use std::sync::Arc;

use hashbrown::HashMap;
use parking_lot::Mutex;

use freshet_core::{Error, Result, SqlState};

/// One notification as a listener receives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notification {
    /// The sending session's id (its backend process id on the wire).
    pub process_id: u32,
    pub channel: String,
    pub payload: String,
}

/// The longest payload PostgreSQL accepts (bytes).
const MAX_PAYLOAD: usize = 7999;
/// The longest channel name (PostgreSQL's NAMEDATALEN - 1).
const MAX_CHANNEL: usize = 63;

/// What a listening session has received and not yet taken.
#[derive(Default)]
pub struct Inbox {
    queue: Mutex<VecDeque<Notification>>,
    /// Woken when a notification arrives (runtime-agnostic).
    arrived: tokio::sync::Notify,
}

impl Inbox {
    /// Takes everything received so far.
    pub fn take(&self) -> Vec<Notification> {
        self.queue.lock().drain(..).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.lock().is_empty()
    }

    /// Completes when a notification has arrived (at once if one is waiting).
    pub async fn arrived(&self) {
        loop {
            let notified = self.arrived.notified();
            if !self.is_empty() {
                return;
            }
            notified.await;
        }
    }
}

/// The sessions listening on one channel: session id and inbox.
type Listeners = Vec<(u32, Arc<Inbox>)>;

/// The listeners of one database.
#[derive(Default)]
pub(crate) struct Channels {
    listeners: Mutex<HashMap<String, Listeners>>,
}

impl Channels {
    fn deliver(&self, process_id: u32, sent: Vec<(String, String)>) {
        let listeners = self.listeners.lock();
        for (channel, payload) in sent {
            for (_, inbox) in listeners.get(&channel).into_iter().flatten() {
                inbox.queue.lock().push_back(Notification { process_id, channel: channel.clone(), payload: payload.clone() });
                inbox.arrived.notify_one();
            }
        }
    }
}

/// What a session's open transaction will do when it commits, in order.
#[derive(Debug)]
enum Pending {
    Notify { channel: String, payload: String },
    Listen(String),
    /// UNLISTEN of one channel, or of every channel (`None`).
    Unlisten(Option<String>),
}

/// One session's side: the channels it listens on, its inbox, and what its open transaction
/// will send, listen to and stop listening to.
pub(crate) struct SessionNotify {
    channels: Arc<Channels>,
    session: u32,
    pub(crate) inbox: Arc<Inbox>,
    listening: Mutex<Vec<String>>,
    pending: Mutex<Vec<Pending>>,
}

impl SessionNotify {
    pub(crate) fn new(channels: Arc<Channels>, session: u32) -> Self {
        SessionNotify { channels, session, inbox: Arc::default(), listening: Mutex::default(), pending: Mutex::default() }
    }

    /// LISTEN: once the transaction commits, notifications on `channel` reach this session.
    pub(crate) fn listen(&self, channel: &str) -> Result<()> {
        check_channel(channel)?;
        self.pending.lock().push(Pending::Listen(channel.to_string()));
        Ok(())
    }

    /// UNLISTEN `channel`, or every channel (`None`, `UNLISTEN *`), once the transaction commits.
    pub(crate) fn unlisten(&self, channel: Option<&str>) {
        self.pending.lock().push(Pending::Unlisten(channel.map(str::to_string)));
    }

    fn start_listening(&self, channel: &str) {
        let mut listening = self.listening.lock();
        if !listening.iter().any(|c| c == channel) {
            listening.push(channel.to_string());
            self.channels.listeners.lock().entry(channel.to_string()).or_default().push((self.session, self.inbox.clone()));
        }
    }

    fn stop_listening(&self, channel: Option<&str>) {
        let mut listening = self.listening.lock();
        let mut listeners = self.channels.listeners.lock();
        listening.retain(|c| {
            let drop = channel.is_none_or(|ch| ch == c);
            if drop && let Some(list) = listeners.get_mut(c) {
                list.retain(|(s, _)| *s != self.session);
                if list.is_empty() {
                    listeners.remove(c);
                }
            }
            !drop
        });
    }

    /// NOTIFY / pg_notify: queued until the transaction ends.
    pub(crate) fn notify(&self, channel: &str, payload: &str) -> Result<()> {
        check_channel(channel)?;
        if payload.len() > MAX_PAYLOAD {
            return Err(Error::new(SqlState::InvalidParameterValue, "payload string too long"));
        }
        let mut pending = self.pending.lock();
        let queued = |p: &Pending| matches!(p, Pending::Notify { channel: c, payload: q } if c == channel && q == payload);
        if !pending.iter().any(queued) {
            pending.push(Pending::Notify { channel: channel.to_string(), payload: payload.to_string() });
        }
        Ok(())
    }

    /// What the open transaction has queued so far: ROLLBACK TO a savepoint set now drops
    /// what is queued after it ([`Self::rollback_to`]).
    pub(crate) fn mark(&self) -> usize {
        self.pending.lock().len()
    }

    /// Drops what was queued after `mark` (the transaction rolled back to a savepoint).
    pub(crate) fn rollback_to(&self, mark: usize) {
        self.pending.lock().truncate(mark);
    }

    /// The transaction ended. If it committed, its LISTEN and UNLISTEN take effect in order,
    /// then its notifications are sent; otherwise everything it queued is dropped.
    pub(crate) fn end_transaction(&self, committed: bool) {
        let queued = std::mem::take(&mut *self.pending.lock());
        if !committed || queued.is_empty() {
            return;
        }
        let mut sent = Vec::new();
        for p in queued {
            match p {
                Pending::Notify { channel, payload } => sent.push((channel, payload)),
                Pending::Listen(channel) => self.start_listening(&channel),
                Pending::Unlisten(channel) => self.stop_listening(channel.as_deref()),
            }
        }
        if !sent.is_empty() {
            self.channels.deliver(self.session, sent);
        }
    }
}

impl Drop for SessionNotify {
    fn drop(&mut self) {
        self.stop_listening(None);
    }
}

fn check_channel(channel: &str) -> Result<()> {
    if channel.is_empty() {
        return Err(Error::new(SqlState::InvalidParameterValue, "channel name cannot be empty"));
    }
    if channel.len() > MAX_CHANNEL {
        return Err(Error::new(SqlState::InvalidParameterValue, "channel name too long"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_deliver_to_listeners_once_and_rollbacks_drop() {
        let channels = Arc::new(Channels::default());
        let (a, b) = (SessionNotify::new(channels.clone(), 1), SessionNotify::new(channels.clone(), 2));
        b.listen("jobs").unwrap();
        b.listen("jobs").unwrap();
        b.end_transaction(true);
        a.notify("jobs", "1").unwrap();
        a.notify("jobs", "1").unwrap();
        a.notify("other", "x").unwrap();
        a.notify("jobs", "2").unwrap();
        assert!(b.inbox.is_empty(), "nothing before the commit");
        a.end_transaction(true);
        let got: Vec<(u32, String)> = b.inbox.take().into_iter().map(|n| (n.process_id, n.payload)).collect();
        assert_eq!(got, vec![(1, "1".to_string()), (1, "2".to_string())]);
        a.notify("jobs", "3").unwrap();
        a.end_transaction(false);
        assert!(b.inbox.is_empty(), "a rollback sends nothing");
        b.unlisten(Some("jobs"));
        b.end_transaction(true);
        a.notify("jobs", "4").unwrap();
        a.end_transaction(true);
        assert!(b.inbox.is_empty());
        b.listen("jobs").unwrap();
        b.end_transaction(true);
        drop(b);
        assert!(channels.listeners.lock().is_empty(), "a session that ends stops listening");
        assert!(a.notify("", "x").is_err());
        assert!(a.notify("c", &"x".repeat(8000)).is_err());
    }

    #[test]
    fn listen_takes_effect_at_commit_and_savepoints_drop_what_follows_them() {
        let channels = Arc::new(Channels::default());
        let (a, b) = (SessionNotify::new(channels.clone(), 1), SessionNotify::new(channels.clone(), 2));
        b.listen("jobs").unwrap();
        a.notify("jobs", "early").unwrap();
        a.end_transaction(true);
        assert!(b.inbox.is_empty(), "b's LISTEN has not committed");
        b.end_transaction(false);
        a.notify("jobs", "after a rolled-back LISTEN").unwrap();
        a.end_transaction(true);
        assert!(b.inbox.is_empty(), "a rolled-back LISTEN listens to nothing");
        // Listening and notifying in one transaction: the sender hears itself.
        b.listen("jobs").unwrap();
        b.notify("jobs", "own").unwrap();
        b.end_transaction(true);
        assert_eq!(b.inbox.take().into_iter().map(|n| n.payload).collect::<Vec<_>>(), vec!["own"]);
        // ROLLBACK TO drops the notifications and the UNLISTEN queued after the savepoint.
        a.notify("jobs", "kept").unwrap();
        let mark = a.mark();
        a.notify("jobs", "dropped").unwrap();
        a.notify("jobs", "kept").unwrap();
        a.rollback_to(mark);
        a.end_transaction(true);
        assert_eq!(b.inbox.take().into_iter().map(|n| n.payload).collect::<Vec<_>>(), vec!["kept"]);
        let mark = b.mark();
        b.unlisten(None);
        b.rollback_to(mark);
        b.end_transaction(true);
        a.notify("jobs", "still listening").unwrap();
        a.end_transaction(true);
        assert_eq!(b.inbox.take().len(), 1);
    }
}
