use super::*;

#[test]
fn parses() {
    let s = Schedule::cron("30 0 * * *", Zone::named("Europe/London", "--tz").unwrap()).unwrap();
    let t = s.tick_at("2027-03-29T01:00:00Z".parse().unwrap()).unwrap();
    println!("{t:?}");
}
