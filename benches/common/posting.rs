//! A client of the pump as many users are: posts, each into a new thread, a number of them in
//! flight at once, each waited for until its thread settles.

use std::time::Instant;

use agentpump::PumpHandle;

/// Deliveries per second of `n` posts of `payload`, each into a new thread, `concurrent` at a
/// time.
pub async fn deliveries(pump: &PumpHandle, n: usize, concurrent: usize, payload: &str) -> f64 {
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrent)
        .map(|_| {
            let (pump, payload) = (pump.clone(), payload.to_owned());
            tokio::spawn(async move {
                for _ in 0..n / concurrent {
                    let thread = pump.post(None, None, &payload).await.unwrap().thread();
                    pump.settle(thread).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    (n / concurrent * concurrent) as f64 / started.elapsed().as_secs_f64()
}
