#![allow(clippy::unwrap_used, clippy::expect_used)]

//! The one integration-test binary: the real `redlock` against real
//! `redis-server` processes started by [`harness`].

mod adversarial;
mod alerts;
mod audit;
mod cluster;
mod cold_scripts;
mod compat;
mod config_file;
mod docs;
mod doctor;
mod drift;
mod engine;
mod fencing;
mod found;
mod harness;
mod held_up;
mod history;
mod hold;
mod hostile;
mod hosts;
mod keys;
mod limit;
mod manual;
mod messages;
mod network;
mod noscript;
mod ping;
mod ports;
mod queue_order;
mod readme;
mod recipes;
mod release;
mod restart;
mod review_cron;
mod rules;
mod run;
mod secrets;
mod sentinel;
mod shared;
mod tick;
mod tls;
mod unguarded;
mod waiting;
mod waiting_scale;
