//! Basic auth against bcrypt hashes, kept off the request path: bcrypt is
//! slow by design, so checks run one at a time on their own thread, fed by a
//! bounded queue served fairly by client address (`verify_queue`): a flood
//! of wrong passwords queues behind itself. Verified credentials are
//! remembered (successes only, bounded) so scrapes skip the queue entirely.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::BuildHasher as _;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use tokio::sync::oneshot;

use super::verify_queue::{Job, Queue};

/// Cached successes; the oldest is evicted when full.
const CACHE_MAX: usize = 256;

/// The answer to one `Authorization` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Deny,
    /// Not checked: too many checks waiting (from this source, or at all).
    Busy,
    /// Not checked within the queue timeout.
    TimedOut,
}

struct User {
    hash: String,
    /// Cheaper than the highest cost in use: a failure also spends the
    /// dummy check, so a wrong password takes as long for every user.
    below_max: bool,
}

pub struct BasicAuth {
    queue: Arc<Queue>,
    cache: Mutex<Cache>,
}

impl BasicAuth {
    /// `users` maps names to bcrypt hashes; an invalid hash is an error.
    pub fn new(users: HashMap<String, String>) -> Result<Self, String> {
        let mut costs = HashMap::new();
        for (user, hash) in &users {
            let parts: bcrypt::HashParts = hash.parse().map_err(|e| {
                format!("basic_auth_users.{user}: expected a bcrypt hash ($2y$...): {e}")
            })?;
            costs.insert(user.clone(), parts.get_cost());
        }
        let max = costs.values().copied().max().unwrap_or(4);
        // Unknown users are checked against a hash of the highest cost in
        // use, so timing does not tell which names exist.
        let dummy = bcrypt::hash("gpuscale-unknown-user", max)
            .map_err(|e| format!("basic_auth_users: {e}"))?;
        let users: HashMap<String, User> = users
            .into_iter()
            .map(|(name, hash)| {
                let below_max = costs.get(&name).is_some_and(|&c| c < max);
                (name, User { hash, below_max })
            })
            .collect();
        let queue = Queue::new();
        let worker = queue.clone();
        std::thread::Builder::new()
            .name("bcrypt".into())
            .spawn(move || {
                while let Some(job) = worker.pop() {
                    let ok = verify(&users, &dummy, &job);
                    let _ = job.answer.send(ok);
                }
            })
            .map_err(|e| format!("basic_auth_users: cannot start the password checker: {e}"))?;
        Ok(Self {
            queue,
            cache: Mutex::new(Cache::default()),
        })
    }

    /// Checks an `Authorization` header value from `source`, waiting at
    /// most `wait` for a turn of the password checker.
    pub async fn check(&self, header: Option<&str>, source: IpAddr, wait: Duration) -> Verdict {
        let Some(encoded) = header.and_then(|h| h.strip_prefix("Basic ")) else {
            return Verdict::Deny;
        };
        let (key, cached) = {
            let cache = self.lock();
            let key = cache.key(encoded);
            (key, cache.contains(key))
        };
        if cached {
            return Verdict::Allow;
        }
        let Some((user, pass)) = decode(encoded) else {
            return Verdict::Deny;
        };
        let (answer, rx) = oneshot::channel();
        let job = Job { user, pass, answer };
        if self.queue.push(source.to_canonical(), job).is_err() {
            return Verdict::Busy;
        }
        match tokio::time::timeout(wait, rx).await {
            Ok(Ok(true)) => {
                self.lock().insert(key);
                Verdict::Allow
            }
            Ok(Ok(false)) => Verdict::Deny,
            // Dropped unchecked to make room for another source.
            Ok(Err(_)) => Verdict::Busy,
            Err(_) => Verdict::TimedOut,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for BasicAuth {
    fn drop(&mut self) {
        self.queue.close();
    }
}

/// One check, on the checker thread. Every wrong password costs at least
/// one check at the highest cost in use, whoever the user.
fn verify(users: &HashMap<String, User>, dummy: &str, job: &Job) -> bool {
    match users.get(&job.user) {
        Some(u) => {
            let ok = bcrypt::verify(&job.pass, &u.hash).unwrap_or(false);
            if !ok && u.below_max {
                let _ = bcrypt::verify(&job.pass, dummy);
            }
            ok
        }
        None => {
            let _ = bcrypt::verify(&job.pass, dummy);
            false
        }
    }
}

fn decode(encoded: &str) -> Option<(String, String)> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (user, pass) = text.split_once(':')?;
    Some((user.to_owned(), pass.to_owned()))
}

/// Keys are keyed hashes of the header, so the cache holds no passwords.
#[derive(Default)]
struct Cache {
    hasher: RandomState,
    known: HashSet<u64>,
    order: VecDeque<u64>,
}

impl Cache {
    fn key(&self, encoded: &str) -> u64 {
        self.hasher.hash_one(encoded)
    }

    fn contains(&self, key: u64) -> bool {
        self.known.contains(&key)
    }

    fn insert(&mut self, key: u64) {
        if !self.known.insert(key) {
            return;
        }
        self.order.push_back(key);
        if self.order.len() > CACHE_MAX
            && let Some(old) = self.order.pop_front()
        {
            self.known.remove(&old);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(user: &str, pass: &str) -> String {
        let b64 = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
        format!("Basic {b64}")
    }

    const LOCAL: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    const WAIT: Duration = Duration::from_secs(30);

    #[tokio::test]
    async fn only_successes_are_cached_and_eviction_takes_one_entry() {
        let hash = bcrypt::hash("s3cret", 4).expect("hash");
        let auth = BasicAuth::new(HashMap::from([("prom".to_owned(), hash)])).expect("auth");
        let check = |h: Option<String>| {
            let auth = &auth;
            async move { auth.check(h.as_deref(), LOCAL, WAIT).await }
        };
        assert_eq!(check(Some(header("prom", "s3cret"))).await, Verdict::Allow);
        assert_eq!(check(Some(header("prom", "wrong"))).await, Verdict::Deny);
        assert_eq!(check(Some(header("nobody", "s3cret"))).await, Verdict::Deny);
        assert_eq!(check(None).await, Verdict::Deny);
        assert_eq!(auth.lock().known.len(), 1);
        let mut cache = Cache::default();
        for k in 0..=CACHE_MAX as u64 {
            cache.insert(k);
        }
        assert_eq!(cache.known.len(), CACHE_MAX);
        assert!(!cache.contains(0) && cache.contains(1));
    }

    #[tokio::test]
    async fn a_wrong_password_costs_the_highest_cost_for_every_user() {
        let users = HashMap::from([
            ("cheap".to_owned(), bcrypt::hash("a", 4).expect("hash")),
            ("dear".to_owned(), bcrypt::hash("b", 8).expect("hash")),
        ]);
        let auth = BasicAuth::new(users).expect("auth");
        let time = |user: &'static str| {
            let auth = &auth;
            async move {
                let t = std::time::Instant::now();
                let v = auth.check(Some(&header(user, "wrong")), LOCAL, WAIT).await;
                assert_eq!(v, Verdict::Deny);
                t.elapsed()
            }
        };
        let (cheap, unknown) = (time("cheap").await, time("nobody").await);
        // Cost 8 is 16× cost 4: without the padding check the cheap user
        // would answer far faster than an unknown one.
        assert!(
            cheap * 2 > unknown,
            "cheap user {cheap:?}, unknown {unknown:?}"
        );
    }

    #[test]
    fn a_bad_hash_is_an_error_naming_the_user() {
        let err = BasicAuth::new(HashMap::from([("prom".to_owned(), "plain".to_owned())]))
            .err()
            .unwrap_or_default();
        assert!(err.contains("basic_auth_users.prom"), "{err}");
    }
}
