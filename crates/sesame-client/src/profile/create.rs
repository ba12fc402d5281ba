//! Making a profile: the `Profile::create*` constructors and the first
//! header, key check and default index they write.

use std::path::Path;

use rand_core::{OsRng, RngCore};
use sesame_core::Params;
use sesame_crypto::{Aes256GcmSiv, Key};

use super::header::{Header, KdfHeader};
use super::{
    find_scheme, key_file_digest, label, new_client, Profile, CHECK_TEXT, DEFAULT_INDEX, FORMAT_V2,
    HEADER_FILE, INDEX_DIR, STORE_EMBEDDED, STORE_SERVER,
};
use crate::backend::EmbeddedBackend;
use crate::error::{ClientError, Result};
use crate::fsutil;
use crate::kdf::KdfParams;
use crate::network::ServerBinding;
use crate::state::IndexState;

/// What a new profile is made with besides its passphrase, scheme and
/// cost.
#[derive(Default)]
pub(super) struct Making<'a> {
    /// Bound to this server from the start.
    server: Option<&'a ServerBinding>,
    /// Format 2, as earlier builds made them (tests only).
    legacy_v2: bool,
    /// Needs a key file with this digest.
    key_file: Option<[u8; 32]>,
}

impl<'a> Making<'a> {
    /// Bound to `server` where given, needing `key_file` where given.
    fn new(server: Option<&'a ServerBinding>, key_file: Option<&[u8]>) -> Result<Self> {
        Ok(Making {
            server,
            legacy_v2: false,
            key_file: key_file.map(key_file_digest).transpose()?,
        })
    }
}

impl Profile {
    /// Creates a profile in `dir` (made if absent) with the default
    /// Argon2id parameters, and its [`DEFAULT_INDEX`] bound to `scheme`
    /// with `params`.
    pub fn create(
        dir: impl AsRef<Path>,
        passphrase: &str,
        scheme: &str,
        params: &Params,
    ) -> Result<Profile> {
        Self::create_with_kdf(dir, passphrase, scheme, params, KdfParams::default())
    }

    /// As [`Profile::create`], with explicit Argon2id parameters (see
    /// [`crate::insecure::fast_kdf`] for tests).
    pub fn create_with_kdf(
        dir: impl AsRef<Path>,
        passphrase: &str,
        scheme: &str,
        params: &Params,
        kdf: KdfParams,
    ) -> Result<Profile> {
        Self::create_inner(
            dir.as_ref(),
            passphrase,
            scheme,
            params,
            kdf,
            Making::default(),
        )
    }

    /// As [`Profile::create_with_kdf`], the master key sealed under the
    /// passphrase *and* the key file's contents (at least
    /// [`MIN_KEY_FILE`] bytes): opening needs both
    /// ([`Profile::open_with_key_file`]).
    pub fn create_with_key_file(
        dir: impl AsRef<Path>,
        passphrase: &str,
        scheme: &str,
        params: &Params,
        kdf: KdfParams,
        key_file: &[u8],
    ) -> Result<Profile> {
        let making = Making::new(None, Some(key_file))?;
        Self::create_inner(dir.as_ref(), passphrase, scheme, params, kdf, making)
    }

    /// As [`Profile::create_with_kdf`], bound to a server from the start
    /// (see [`Profile::bind_server`]): the binding is written before the
    /// header, so the profile never exists unbound. The server's index
    /// must be created separately ([`NetworkBackend::create_index`]).
    pub fn create_with_server(
        dir: impl AsRef<Path>,
        passphrase: &str,
        scheme: &str,
        params: &Params,
        kdf: KdfParams,
        server: &ServerBinding,
    ) -> Result<Profile> {
        let making = Making::new(Some(server), None)?;
        Self::create_inner(dir.as_ref(), passphrase, scheme, params, kdf, making)
    }

    /// As [`Profile::create_with_server`], needing a key file as well as
    /// the passphrase (see [`Profile::create_with_key_file`]).
    pub fn create_with_server_and_key_file(
        dir: impl AsRef<Path>,
        passphrase: &str,
        scheme: &str,
        params: &Params,
        kdf: KdfParams,
        server: &ServerBinding,
        key_file: &[u8],
    ) -> Result<Profile> {
        let making = Making::new(Some(server), Some(key_file))?;
        Self::create_inner(dir.as_ref(), passphrase, scheme, params, kdf, making)
    }

    /// A format-2 profile, as earlier builds made them (for the tests of
    /// reading and moving them to format 3).
    #[doc(hidden)]
    pub fn create_format2_for_tests(
        dir: impl AsRef<Path>,
        passphrase: &str,
        scheme: &str,
        params: &Params,
        kdf: KdfParams,
    ) -> Result<Profile> {
        let making = Making {
            legacy_v2: true,
            ..Making::default()
        };
        Self::create_inner(dir.as_ref(), passphrase, scheme, params, kdf, making)
    }

    /// A format-2 header: the master key is the Argon2id output, checked
    /// by a sealed constant.
    pub(super) fn legacy_header(
        id: String,
        store: &str,
        kdf: KdfParams,
        passphrase: &str,
    ) -> Result<(Header, Key<32>, Option<Key<32>>)> {
        let rng = &mut OsRng;
        let (kdf_header, salt) = KdfHeader::fresh(kdf);
        let master = kdf.derive(passphrase, &salt)?;
        let mut header = Header {
            format: FORMAT_V2.into(),
            id,
            store: Some(store.into()),
            kdf: kdf_header,
            check: None,
            wrapped: None,
            key_file: false,
            version: 0,
        };
        let check_key: Key<32> = master.derive(label::CHECK);
        let sealed = Aes256GcmSiv::new(&check_key)
            .seal(rng, &header.check_aad(), CHECK_TEXT)
            .map_err(|_| ClientError::InvalidArgument("key check does not seal".into()))?;
        header.check = Some(hex::encode(sealed));
        Ok((header, master, None))
    }

    pub(super) fn create_inner(
        dir: &Path,
        passphrase: &str,
        scheme: &str,
        params: &Params,
        kdf: KdfParams,
        making: Making<'_>,
    ) -> Result<Profile> {
        let Making {
            server,
            legacy_v2,
            key_file,
        } = making;
        let key_file = key_file.as_ref();
        let header_path = dir.join(HEADER_FILE);
        if header_path.exists() {
            return Err(ClientError::ProfileExists(dir.to_path_buf()));
        }
        if passphrase.is_empty() {
            return Err(ClientError::InvalidArgument(
                "the passphrase is empty".into(),
            ));
        }
        kdf.validate()?;
        let found = find_scheme(scheme)?;
        let rng = &mut OsRng;
        // Check the parameters before anything is written.
        let client = new_client(&found, rng, params)?;

        let mut id = [0u8; 16];
        rng.fill_bytes(&mut id);
        let store = if server.is_some() {
            STORE_SERVER
        } else {
            STORE_EMBEDDED
        };
        let (header, master, kek) = if legacy_v2 {
            Self::legacy_header(hex::encode(id), store, kdf, passphrase)?
        } else {
            let master = Key::<32>::generate(rng);
            let (header, kek) = Header::wrap(
                &hex::encode(id),
                store,
                kdf,
                passphrase,
                key_file,
                &master,
                0,
            )?;
            (header, master, Some(kek))
        };

        fsutil::create_private_dir(&dir.join(INDEX_DIR))?;
        // The profile directory may have existed (made by the user with
        // the default umask): it becomes private, as its parts are.
        fsutil::make_private_dir(dir)?;
        let profile = Profile::from_master(dir, &header, master, kek);
        *profile
            .key_file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = key_file.copied();
        let state = IndexState::new(found.descriptor.name, params, client.save_state()?);
        profile.save_state(rng, DEFAULT_INDEX, &state)?;
        match server {
            Some(server) => profile.bind_server(server)?,
            // The store exists from the start: a missing one is damage.
            None => drop(EmbeddedBackend::open(&profile.store_path(), true)?),
        }
        let json = serde_json::to_vec_pretty(&header)
            .map_err(|e| ClientError::InvalidArgument(format!("profile header: {e}")))?;
        // The header goes last: its presence is what makes a profile.
        fsutil::write_atomic(&header_path, &json)?;
        Ok(profile)
    }
}
