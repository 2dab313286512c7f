//! Ctrl-C seen from any thread: while an [`InterruptWatch`] lives, SIGINT's handler counts each
//! signal before handing it on to the handler it stands in front of (Python's), so that a fetch
//! consumed on a thread where Python never runs signal handlers (polars' engine runs an IO
//! source on its own threads, while the main thread waits in `collect`) stops at once.

use std::future::{poll_fn, Future};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use pyo3::prelude::*;

use crate::client::scope::Stop;

/// SIGINTs that reached the counting handler.
static SIGNALS: AtomicU64 = AtomicU64::new(0);

/// How often a watched fetch looks at the count while it waits on the network.
const LOOK: Duration = Duration::from_millis(2);

/// A watch of Ctrl-C: it fired once a SIGINT arrived after it was made.
#[derive(Debug)]
pub struct Watch {
    since: u64,
    attached: bool,
}

impl Watch {
    /// Starts watching; one that never fires where SIGINT is ignored or left to its default
    /// (nothing in the process handles it), or off Unix.
    pub fn start() -> Watch {
        let attached = hook::attach();
        Watch {
            since: SIGNALS.load(Ordering::SeqCst),
            attached,
        }
    }

    /// A SIGINT arrived since the watch began.
    pub fn fired(&self) -> bool {
        self.attached && SIGNALS.load(Ordering::SeqCst) != self.since
    }

    /// Runs `work` to its end (Some), or until the watch fires (None: `work` is dropped, which
    /// cancels its requests). Looked at before every step of the work, and every [`LOOK`]
    /// while it waits; the tasks of the work that run meanwhile send nothing once the signal
    /// arrived when the work runs in a scope that the watch stops (`scope::stoppable`).
    pub async fn unless_fired<F: Future>(&self, work: F) -> Option<F::Output> {
        let mut work = std::pin::pin!(work);
        let mut look = tokio::time::interval(LOOK);
        look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        poll_fn(|cx| {
            if self.fired() {
                return Poll::Ready(None);
            }
            if let Poll::Ready(done) = work.as_mut().poll(cx) {
                return Poll::Ready(Some(done));
            }
            if self.attached {
                while look.poll_tick(cx).is_ready() {}
            }
            Poll::Pending
        })
        .await
    }
}

/// A fetch watched stops at the signal: none of its requests leaves once the signal arrived,
/// whichever thread runs it, and however late (see `Scope::stoppable`).
impl Stop for Watch {
    fn stopping(&self) -> bool {
        self.fired()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if self.attached {
            hook::detach();
        }
    }
}

/// A watch of Ctrl-C for a fetch consumed off the main thread (see the module's doc).
#[pyclass(name = "InterruptWatch", module = "surveillance._core", frozen)]
pub struct InterruptWatch {
    pub watch: Arc<Watch>,
}

#[pymethods]
impl InterruptWatch {
    #[new]
    fn new() -> Self {
        InterruptWatch {
            watch: Arc::new(Watch::start()),
        }
    }

    /// A SIGINT arrived since the watch was made.
    #[getter]
    fn fired(&self) -> bool {
        self.watch.fired()
    }
}

#[cfg(unix)]
mod hook {
    //! The counting handler, put in front of SIGINT's handler while watches live.

    use std::ffi::{c_int, c_void};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Mutex;

    use super::SIGNALS;

    /// The handler the counting one hands each signal on to, and whether it takes siginfo.
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    static NEXT_TAKES_INFO: AtomicBool = AtomicBool::new(false);

    /// Live watches, and the action that the counting handler replaced (put back when the last
    /// watch ends).
    static STATE: Mutex<(usize, Option<libc::sigaction>)> = Mutex::new((0, None));

    type Plain = extern "C" fn(c_int);
    type WithInfo = extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void);

    /// Async-signal-safe: an atomic add, then the next handler, as the kernel would call it.
    extern "C" fn counting(sig: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
        SIGNALS.fetch_add(1, Ordering::SeqCst);
        let next = NEXT.load(Ordering::SeqCst);
        if next == 0 {
            return;
        }
        // SAFETY: `next` is the address of the handler that `sigaction` reported for SIGINT,
        // with the signature its flags gave it.
        unsafe {
            if NEXT_TAKES_INFO.load(Ordering::SeqCst) {
                std::mem::transmute::<usize, WithInfo>(next)(sig, info, context)
            } else {
                std::mem::transmute::<usize, Plain>(next)(sig)
            }
        }
    }

    fn ours() -> usize {
        counting as WithInfo as usize
    }

    fn current() -> Option<libc::sigaction> {
        // SAFETY: reads SIGINT's action into a zeroed struct of the right type.
        unsafe {
            let mut now: libc::sigaction = std::mem::zeroed();
            (libc::sigaction(libc::SIGINT, std::ptr::null(), &mut now) == 0).then_some(now)
        }
    }

    /// Puts the counting handler in front of SIGINT's (again, where something replaced it
    /// since: Python's `signal.signal`); false where SIGINT is ignored or left to its default.
    pub fn attach() -> bool {
        let mut state = super::lock(&STATE);
        let Some(now) = current() else {
            return false;
        };
        if now.sa_sigaction != ours() {
            if now.sa_sigaction == libc::SIG_IGN || now.sa_sigaction == libc::SIG_DFL {
                return false;
            }
            NEXT.store(now.sa_sigaction, Ordering::SeqCst);
            NEXT_TAKES_INFO.store(now.sa_flags & libc::SA_SIGINFO != 0, Ordering::SeqCst);
            // The same mask and flags (Python's leave system calls interrupted, not restarted).
            let mut counting = now;
            counting.sa_sigaction = ours();
            counting.sa_flags |= libc::SA_SIGINFO;
            // SAFETY: installs a handler that only does an atomic add and calls the previous one.
            if unsafe { libc::sigaction(libc::SIGINT, &counting, std::ptr::null_mut()) } != 0 {
                return false;
            }
            state.1 = Some(now);
        }
        state.0 += 1;
        true
    }

    /// Ends a watch; the last puts back the handler that the counting one stood in front of,
    /// unless something replaced it since.
    pub fn detach() {
        let mut state = super::lock(&STATE);
        state.0 = state.0.saturating_sub(1);
        if state.0 > 0 {
            return;
        }
        if let (Some(saved), Some(now)) = (state.1.take(), current()) {
            if now.sa_sigaction == ours() {
                // SAFETY: the action `sigaction` reported before the counting one replaced it.
                unsafe { libc::sigaction(libc::SIGINT, &saved, std::ptr::null_mut()) };
            }
        }
    }
}

#[cfg(not(unix))]
mod hook {
    //! Off Unix, no watch fires: Ctrl-C reaches the fetch as before, when its thread looks.

    pub fn attach() -> bool {
        false
    }

    pub fn detach() {}
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    static HANDED_ON: AtomicUsize = AtomicUsize::new(0);

    extern "C" fn python_like(_: std::ffi::c_int) {
        HANDED_ON.fetch_add(1, Ordering::SeqCst);
    }

    fn handler_now() -> usize {
        // SAFETY: reads SIGINT's action.
        unsafe {
            let mut now: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGINT, std::ptr::null(), &mut now);
            now.sa_sigaction
        }
    }

    // One test: SIGINT's action and the count are the process's.
    #[test]
    fn a_watch_sees_sigint_hands_it_on_stops_work_and_puts_the_handler_back() {
        let plain = python_like as extern "C" fn(std::ffi::c_int) as usize;
        // SAFETY: the test's own handler for SIGINT (an atomic add), as Python installs one.
        let previous = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = plain;
            action.sa_flags = libc::SA_ONSTACK;
            let mut previous: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGINT, &action, &mut previous);
            previous
        };
        let watch = Watch::start();
        let again = Watch::start();
        assert!(!watch.fired() && handler_now() != plain);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        assert_eq!(rt.block_on(watch.unless_fired(async { 7 })), Some(7));
        let fire = async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            // SAFETY: raises SIGINT in this thread, whose handler is the counting one.
            unsafe { libc::raise(libc::SIGINT) };
        };
        let (stopped, ()) = rt.block_on(async {
            tokio::join!(watch.unless_fired(std::future::pending::<()>()), fire)
        });
        assert!(stopped.is_none() && watch.fired() && again.fired());
        assert_eq!(HANDED_ON.load(Ordering::SeqCst), 1);
        drop((watch, again));
        assert_eq!(handler_now(), plain);
        // Where SIGINT is ignored, a watch never fires, and leaves the action alone.
        // SAFETY: SIG_IGN for SIGINT, then the test process's own action back.
        unsafe {
            let mut ignore: libc::sigaction = std::mem::zeroed();
            ignore.sa_sigaction = libc::SIG_IGN;
            libc::sigaction(libc::SIGINT, &ignore, std::ptr::null_mut());
            let ignored = Watch::start();
            libc::raise(libc::SIGINT);
            assert!(!ignored.fired() && handler_now() == libc::SIG_IGN);
            drop(ignored);
            libc::sigaction(libc::SIGINT, &previous, std::ptr::null_mut());
        }
    }
}
