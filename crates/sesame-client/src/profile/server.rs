//! A profile and its server: joining a profile from another device
//! ([`Profile::join`]), the server binding, and sessions over another
//! backend.

use std::path::{Path, PathBuf};

use rand_core::OsRng;
use sesame_crypto::Aes256GcmSiv;

use super::{
    check_index_name, key_file_digest, split_remote_index, Profile, StoreKind, DEFAULT_INDEX,
    FORMAT, HEADER_FILE, INDEX_DIR, STORE_SERVER,
};
use crate::backend::Backend;
use crate::error::{ClientError, Result};
use crate::fsutil;
use crate::kdf::KdfLimit;
use crate::network::{load_binding, save_binding, NetworkBackend, ServerBinding, SERVER_FILE};
use crate::session::Session;

impl Profile {
    /// Joins, as another device, the server profile that index
    /// `remote_index` of the tenant belongs to (the name the server knows
    /// it by: the profile's prefix, then its name, as `sesame status`
    /// shows it), in the new directory `dir`. The profile's header (its
    /// master key wrapped under the passphrase, and nothing secret) and
    /// the index's client state are kept on the server by the devices
    /// that use it ([`crate::session`]); `passphrase` (and `key_file`,
    /// for a profile made with one) must open the header. The new device
    /// writes its own copy of the header, the binding (with the tenant's
    /// token in `binding`, whose prefix is ignored: it is the index's),
    /// and the state of the index and of the profile's default index.
    /// Returns the profile and the index's name in it.
    ///
    /// Nothing is written before the passphrase has opened the header; a
    /// failure afterwards leaves a directory without `profile.json`, so
    /// not a profile.
    pub fn join(
        dir: impl AsRef<Path>,
        passphrase: &str,
        key_file: Option<&[u8]>,
        binding: &ServerBinding,
        remote_index: &str,
    ) -> Result<(Profile, String)> {
        Self::join_with_limit(
            dir,
            passphrase,
            key_file,
            binding,
            remote_index,
            KdfLimit::default(),
        )
    }

    /// As [`Profile::join`], accepting in the server's header Argon2id
    /// costs up to `limit` (beyond, nothing is derived and nothing
    /// written).
    pub fn join_with_limit(
        dir: impl AsRef<Path>,
        passphrase: &str,
        key_file: Option<&[u8]>,
        binding: &ServerBinding,
        remote_index: &str,
        limit: KdfLimit,
    ) -> Result<(Profile, String)> {
        let dir = dir.as_ref();
        if dir.join(HEADER_FILE).exists() {
            return Err(ClientError::ProfileExists(dir.to_path_buf()));
        }
        check_index_name(remote_index)?;
        let (prefix, index) = split_remote_index(remote_index);
        check_index_name(index)?;
        let mut binding = binding.clone();
        binding.index_prefix = prefix.to_owned();
        let mut backend = NetworkBackend::connect(&binding)?;
        if !backend.indexes()?.iter().any(|i| i == index) {
            return Err(ClientError::InvalidArgument(format!(
                "the server has no index {remote_index:?} for this token"
            )));
        }
        let records = backend
            .read_records(
                index,
                &[crate::session::shared::PROFILE_RECORD.to_owned()],
                &[],
            )?
            .ok_or_else(|| {
                ClientError::InvalidArgument(
                    "this server keeps no shared client state (it is older than this client): \
                     a second device cannot join"
                        .into(),
                )
            })?;
        let header = records
            .into_iter()
            .next()
            .filter(|r| r.version > 0)
            .ok_or_else(|| {
                ClientError::InvalidArgument(format!(
                    "index {remote_index:?} holds no profile to join: run a command on it from \
                     the first device with this version of Sesame (a profile of header format \
                     1 or 2 must run `sesame passwd` first)"
                ))
            })?
            .value;
        let profile = Self::open_header(dir, &header, passphrase, key_file, Some(&limit))?;
        if profile.format() != FORMAT {
            return Err(ClientError::ProfileCorrupt {
                path: dir.join(HEADER_FILE),
                reason: "the server's header is not format 3".into(),
            });
        }
        *profile
            .key_file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            key_file.map(key_file_digest).transpose()?;
        fsutil::create_private_dir(&dir.join(INDEX_DIR))?;
        fsutil::make_private_dir(dir)?;
        profile.bind_server(&binding)?;
        let cipher = profile.state_cipher();
        let mut names = vec![index];
        if index != DEFAULT_INDEX {
            names.push(DEFAULT_INDEX);
        }
        for name in names {
            let fetched = crate::session::shared::fetch(&mut backend, &cipher, name)?;
            match fetched.and_then(|f| f.opened.map(|o| (f.version, o))) {
                Some((version, (state, _))) => {
                    crate::session::shared::adopt_locally(
                        &profile.shared_sidecar(name),
                        version,
                        || profile.save_state(&mut OsRng, name, &state),
                    )?;
                }
                None if name == index => {
                    return Err(ClientError::InvalidArgument(format!(
                        "index {remote_index:?} has no shared client state on the server: run a \
                         command on it from the first device"
                    )))
                }
                // The default index's state comes when its first device
                // shares it (Profile::session fetches it then).
                None => {}
            }
        }
        fsutil::write_atomic(&dir.join(HEADER_FILE), &header)?;
        Ok((profile, index.to_owned()))
    }

    /// Path of the server binding.
    pub fn server_path(&self) -> PathBuf {
        self.dir.join(SERVER_FILE)
    }

    /// Binds the profile to a server: from now on its sessions reach their
    /// indexes there. The token is stored sealed under a key derived from
    /// the passphrase. Several URLs must be servers of one store: each
    /// that answers is asked its store's identity.
    pub fn bind_server(&self, binding: &ServerBinding) -> Result<()> {
        crate::network::check_one_store(binding)?;
        let aead = Aes256GcmSiv::new(&self.server_key);
        save_binding(&mut OsRng, &aead, &self.id, &self.server_path(), binding)?;
        // An existing profile's header now says so (at creation the header
        // is written afterwards, already saying so).
        if self.dir.join(HEADER_FILE).exists()
            && self.header().store.as_deref() != Some(STORE_SERVER)
        {
            self.write_header(StoreKind::Server)?;
        }
        Ok(())
    }

    /// The server the profile is bound to, if any.
    pub fn server(&self) -> Result<Option<ServerBinding>> {
        let aead = Aes256GcmSiv::new(&self.server_key);
        load_binding(&aead, &self.id, &self.server_path())
    }

    /// A session on `index` whose server halves are reached through
    /// `backend` (another store, or a remote server).
    pub fn session_with(&self, index: &str, backend: Box<dyn Backend>) -> Result<Session> {
        self.check_not_rotating()?;
        check_index_name(index)?;
        let lock = self.lock(index)?;
        let state = self.load_state(index)?;
        Session::new(self.session_base(index), index, state, backend, lock)
    }
}
