//! Basic auth against bcrypt hashes, kept off the request path: bcrypt is
//! slow by design, so checks run one at a time on a blocking thread and a
//! flood of wrong passwords only queues behind itself. Verified credentials
//! are remembered (successes only, bounded) so scrapes skip bcrypt.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::BuildHasher as _;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use tokio::sync::Semaphore;
use tracing::warn;

/// Cached successes; the oldest is evicted when full.
const CACHE_MAX: usize = 256;
/// bcrypt checks running at once: a flood takes at most this many cores.
const VERIFIERS: usize = 1;

pub struct BasicAuth {
    users: Arc<HashMap<String, String>>,
    /// Hash of the highest cost in `users`: unknown users spend as long as
    /// known ones, so timing does not tell which names exist.
    dummy: Arc<str>,
    verifiers: Semaphore,
    cache: Mutex<Cache>,
}

impl BasicAuth {
    /// `users` maps names to bcrypt hashes; an invalid hash is an error.
    pub fn new(users: HashMap<String, String>) -> Result<Self, String> {
        let mut cost = 4;
        for (user, hash) in &users {
            let parts: bcrypt::HashParts = hash.parse().map_err(|e| {
                format!("basic_auth_users.{user}: expected a bcrypt hash ($2y$...): {e}")
            })?;
            cost = cost.max(parts.get_cost());
        }
        let dummy = bcrypt::hash("gpuscale-unknown-user", cost)
            .map_err(|e| format!("basic_auth_users: {e}"))?;
        Ok(Self {
            users: Arc::new(users),
            dummy: dummy.into(),
            verifiers: Semaphore::new(VERIFIERS),
            cache: Mutex::new(Cache::default()),
        })
    }

    /// Checks an `Authorization` header value.
    pub async fn check(&self, header: Option<&str>) -> bool {
        let Some(encoded) = header.and_then(|h| h.strip_prefix("Basic ")) else {
            return false;
        };
        let (key, cached) = {
            let cache = self.lock();
            let key = cache.key(encoded);
            (key, cache.contains(key))
        };
        if cached {
            return true;
        }
        let Some((user, pass)) = decode(encoded) else {
            return false;
        };
        let Ok(_turn) = self.verifiers.acquire().await else {
            return false;
        };
        let (users, dummy) = (self.users.clone(), self.dummy.clone());
        let verified = tokio::task::spawn_blocking(move || {
            let hash = users.get(&user).map_or(&*dummy, String::as_str);
            // Verify first: an unknown user must not return early.
            let matches = bcrypt::verify(pass, hash).unwrap_or(false);
            matches && users.contains_key(&user)
        })
        .await;
        let ok = verified.unwrap_or_else(|e| {
            warn!(error = %e, "password check failed");
            false
        });
        if ok {
            self.lock().insert(key);
        }
        ok
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
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

    #[tokio::test]
    async fn only_successes_are_cached_and_eviction_takes_one_entry() {
        let hash = bcrypt::hash("s3cret", 4).expect("hash");
        let auth = BasicAuth::new(HashMap::from([("prom".to_owned(), hash)])).expect("auth");
        assert!(auth.check(Some(&header("prom", "s3cret"))).await);
        assert!(!auth.check(Some(&header("prom", "wrong"))).await);
        assert!(!auth.check(Some(&header("nobody", "s3cret"))).await);
        assert!(!auth.check(None).await);
        assert_eq!(auth.lock().known.len(), 1);
        let mut cache = Cache::default();
        for k in 0..=CACHE_MAX as u64 {
            cache.insert(k);
        }
        assert_eq!(cache.known.len(), CACHE_MAX);
        assert!(!cache.contains(0) && cache.contains(1));
    }

    #[test]
    fn a_bad_hash_is_an_error_naming_the_user() {
        let err = BasicAuth::new(HashMap::from([("prom".to_owned(), "plain".to_owned())]))
            .err()
            .unwrap_or_default();
        assert!(err.contains("basic_auth_users.prom"), "{err}");
    }
}
