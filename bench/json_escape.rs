//! The string writer of publishing's JSON (`client::publish::json::write_str`: a scan, then a
//! copy or serde_json) against serde_json's alone, on the strings a webhook record holds: ids,
//! timestamps, product names, and longer notes, a few with a quote, a backslash, a newline or
//! accented letters. Both must write the same bytes. Run: `cargo bench --bench json_escape`;
//! the table goes to `bench/RESULTS.md`.

use std::hint::black_box;
use std::time::Instant;

use surveillance::client::publish::json::write_str;

/// The strings of `n` records, as the models' fields hold them.
fn corpus(n: usize) -> Vec<String> {
    let names = [
        "Sparkling water 0.5 l",
        "Espresso",
        "Croissant au beurre",
        "Caf\u{e9} cr\u{e8}me, grande",
        "Gift card \"Winter\"",
        "USB-C cable 2 m",
        "Bag\\Box combo",
        "Note:\nleft at the counter",
    ];
    let mut out = Vec::with_capacity(n * 4);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..n {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        out.push(format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
            state >> 32,
            i % 65_536,
            i % 4096,
            (i * 7) % 4096,
            state & 0xffff_ffff_ffff
        ));
        out.push(format!(
            "2026-11-{:02}T{:02}:{:02}:00.000Z",
            1 + i % 28,
            i % 24,
            i % 60
        ));
        out.push(names[(state >> 40) as usize % names.len()].to_owned());
        out.push(format!("store-{:04}", i % 500));
    }
    out
}

/// Seconds per pass of `write` over `strings` (the best of `rounds`), and the bytes written.
fn time(strings: &[String], rounds: usize, write: impl Fn(&mut Vec<u8>, &str)) -> (f64, Vec<u8>) {
    let mut best = f64::INFINITY;
    let mut out = Vec::with_capacity(strings.iter().map(|s| s.len() + 8).sum());
    for _ in 0..rounds {
        out.clear();
        let started = Instant::now();
        for s in strings {
            write(&mut out, black_box(s));
        }
        black_box(&out);
        best = best.min(started.elapsed().as_secs_f64());
    }
    (best, out)
}

/// Longer texts: notes of a few hundred bytes, one in eight with a line break.
fn notes(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let line =
                "Customer asked for the receipt by e-mail; the card terminal restarted once. ";
            let mut s = line.repeat(2 + i % 4);
            if i % 8 == 0 {
                s.push_str("\nSigned: caf\u{e9} staff");
            }
            s
        })
        .collect()
}

fn main() {
    let rounds = 15;
    println!("| strings | writer | ns a string | MB/s | time / `write_str` |");
    println!("|---|---|---|---|---|");
    for (label, strings) in [
        (
            "record fields (ids, times, names; 250,000 records)",
            corpus(250_000),
        ),
        ("notes of 150-300 bytes (200,000)", notes(200_000)),
    ] {
        let bytes: usize = strings.iter().map(String::len).sum();
        let (ours, a) = time(&strings, rounds, write_str);
        let (serde, b) = time(&strings, rounds, |out, s| {
            let _ = serde_json::to_writer(&mut *out, s);
        });
        assert!(a == b, "the writers differ");
        let n = strings.len() as f64;
        for (name, t) in [
            ("`write_str`: a scan, then a copy or serde_json", ours),
            ("`serde_json::to_writer` alone", serde),
        ] {
            println!(
                "| {label} | {name} | {:.1} | {:.0} | {:.2}× |",
                t / n * 1e9,
                bytes as f64 / t / 1e6,
                t / ours
            );
        }
    }
}
