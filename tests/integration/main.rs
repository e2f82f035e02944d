//! The one integration-test binary: the real `redlock` against real
//! `redis-server` processes started by [`harness`].

mod engine;
mod harness;
