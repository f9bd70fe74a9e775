//! A named OS thread that owns its state and takes messages over a channel: an engine's batches,
//! a decoder's steps, the predictor's prompts. The [`Actor`] owns the thread; [`Postbox`]es
//! (cheap to clone) send to it; dropping the actor tells the thread to stop once it has read
//! what was sent before, and joins it. The thread reads its [`Mailbox`], which ends at that stop
//! or when every sender is gone.

use std::cell::Cell;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::thread::JoinHandle;

/// What travels on the channel: a message, or the owner's word to stop.
enum Letter<M> {
    Message(M),
    Stop,
}

/// Owns the thread: stops and joins it on drop.
pub struct Actor<M> {
    postbox: Postbox<M>,
    thread: Option<JoinHandle<()>>,
}

/// Sends messages to an actor's thread.
pub struct Postbox<M>(Sender<Letter<M>>);

/// The thread's end of the channel; once it has read the stop it stays closed.
pub struct Mailbox<M> {
    rx: Receiver<Letter<M>>,
    stopped: Cell<bool>,
}

impl<M> std::fmt::Debug for Actor<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = self.thread.as_ref().and_then(|t| t.thread().name().map(str::to_string));
        f.debug_struct("Actor").field("thread", &name).finish_non_exhaustive()
    }
}

impl<M> std::fmt::Debug for Mailbox<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mailbox").finish_non_exhaustive()
    }
}

impl<M> std::fmt::Debug for Postbox<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Postbox").finish_non_exhaustive()
    }
}

/// What a look at the mailbox found without waiting.
#[derive(Debug, PartialEq, Eq)]
pub enum Mail<M> {
    Message(M),
    Empty,
    /// Stopped, or no sender is left: nothing more will come.
    Closed,
}

impl<M: Send + 'static> Actor<M> {
    /// Runs `body` on a new thread named `name`, reading the messages sent to it.
    pub fn spawn(name: String, body: impl FnOnce(Mailbox<M>) + Send + 'static) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new().name(name).spawn(move || body(Mailbox::new(rx)))?;
        Ok(Self { postbox: Postbox(tx), thread: Some(thread) })
    }
}

impl<M> Actor<M> {
    /// A sender to the thread (it stays usable after the actor is gone: its sends then fail).
    pub fn postbox(&self) -> Postbox<M> {
        self.postbox.clone()
    }

    /// Sends `message`; gives it back if the thread has ended.
    pub fn send(&self, message: M) -> Result<(), M> {
        self.postbox.send(message)
    }
}

impl<M> Drop for Actor<M> {
    fn drop(&mut self) {
        let _ = self.postbox.0.send(Letter::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl<M> Clone for Postbox<M> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<M> Postbox<M> {
    /// Sends `message`; gives it back if the thread has ended.
    pub fn send(&self, message: M) -> Result<(), M> {
        self.0.send(Letter::Message(message)).map_err(|e| match e.0 {
            Letter::Message(message) => message,
            Letter::Stop => unreachable!("a postbox sends messages only"),
        })
    }
}

impl<M> Mailbox<M> {
    fn new(rx: Receiver<Letter<M>>) -> Self {
        Self { rx, stopped: Cell::new(false) }
    }

    /// The next message, waiting for it; `None` once stopped or no sender is left.
    pub fn recv(&self) -> Option<M> {
        if self.stopped.get() {
            return None;
        }
        match self.rx.recv() {
            Ok(Letter::Message(message)) => Some(message),
            Ok(Letter::Stop) | Err(_) => {
                self.stopped.set(true);
                None
            }
        }
    }

    /// The messages sent and not read yet, without waiting.
    pub fn sent(&self) -> impl Iterator<Item = M> + '_ {
        std::iter::from_fn(|| match self.try_recv() {
            Mail::Message(message) => Some(message),
            Mail::Empty | Mail::Closed => None,
        })
    }

    /// The next message if one was sent, without waiting.
    pub fn try_recv(&self) -> Mail<M> {
        if self.stopped.get() {
            return Mail::Closed;
        }
        match self.rx.try_recv() {
            Ok(Letter::Message(message)) => Mail::Message(message),
            Err(TryRecvError::Empty) => Mail::Empty,
            Ok(Letter::Stop) | Err(TryRecvError::Disconnected) => {
                self.stopped.set(true);
                Mail::Closed
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc::channel;

    use super::*;

    #[test]
    fn the_thread_reads_what_was_sent_then_stops_when_the_actor_drops() {
        let (seen_tx, seen) = channel();
        let actor = Actor::spawn("test".into(), move |mailbox: Mailbox<u32>| {
            while let Some(n) = mailbox.recv() {
                seen_tx.send(n).unwrap();
            }
            seen_tx.send(0).unwrap();
        })
        .unwrap();
        let postbox = actor.postbox();
        actor.send(1).unwrap();
        postbox.send(2).unwrap();
        drop(actor);
        // The thread was joined: everything sent before the drop was read, then the stop.
        assert_eq!(seen.try_iter().collect::<Vec<_>>(), vec![1, 2, 0]);
        assert_eq!(postbox.send(3), Err(3), "a send to a stopped thread gives the message back");
    }

    #[test]
    fn a_look_without_waiting_tells_empty_from_closed() {
        let (tx, rx) = mpsc::channel();
        let mailbox = Mailbox::new(rx);
        assert_eq!(mailbox.try_recv(), Mail::<u32>::Empty);
        let postbox = Postbox(tx.clone());
        postbox.send(7).unwrap();
        assert_eq!(mailbox.try_recv(), Mail::Message(7));
        tx.send(Letter::Stop).unwrap();
        postbox.send(8).unwrap();
        assert_eq!(mailbox.sent().collect::<Vec<_>>(), Vec::<u32>::new(), "the stop ends what was sent");
        // Once stopped it stays closed, though a sender is left and a message came after.
        assert_eq!(mailbox.try_recv(), Mail::Closed);
        assert_eq!(mailbox.recv(), None);
    }
}
