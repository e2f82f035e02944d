#![allow(clippy::unwrap_used, clippy::expect_used)]

//! The one integration-test binary: the real `redlock` against real
//! `redis-server` processes started by [`harness`].

mod doctor;
mod engine;
mod harness;
mod run;
