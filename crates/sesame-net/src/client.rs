//! The client end of the protocol: an async stub with one method per RPC,
//! written by hand like the service. The client SDK (`sesame-client`)
//! drives it; tests and the benchmark use it directly.

use std::time::Duration;

use bytes::{Buf, BufMut};
use sesame_core::Error;
use tonic::client::Grpc;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic::{Status, Streaming};
use tonic_prost::ProstCodec;

use crate::proto::DEFAULT_MAX_MESSAGE;
use crate::proto::{self, path};

/// How to reach a server.
#[derive(Clone)]
pub struct ClientConfig {
    /// `https://host:port`, or `http://127.0.0.1:port` for a loopback
    /// server in plaintext; or several such URLs separated by commas:
    /// servers on the same store, tried in order
    /// ([`crate::blocking::Connection`] moves to the next when one cannot
    /// be reached, see [`server_urls`]).
    pub url: String,
    /// The tenant's bearer token.
    pub token: String,
    /// A PEM CA certificate to trust instead of the public roots (for a
    /// server with a private CA or a self-signed certificate).
    pub ca_pem: Option<Vec<u8>>,
    /// Longest a request may take (sent to the server as `grpc-timeout`).
    pub timeout: Duration,
    /// Longest connecting may take.
    pub connect_timeout: Duration,
    /// Largest message accepted or sent.
    pub max_message_bytes: usize,
}

impl std::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientConfig")
            .field("url", &self.url)
            .field("token", &"[redacted]")
            .field("ca", &self.ca_pem.is_some())
            .finish_non_exhaustive()
    }
}

impl ClientConfig {
    /// A configuration with default timeouts (60 s per request, 10 s to
    /// connect) and message limit (64 MiB).
    pub fn new(url: impl Into<String>, token: impl Into<String>) -> Self {
        ClientConfig {
            url: url.into(),
            token: token.into(),
            ca_pem: None,
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            max_message_bytes: DEFAULT_MAX_MESSAGE,
        }
    }

    /// Trusts `ca_pem` (PEM) for the server's certificate.
    pub fn with_ca(mut self, ca_pem: Vec<u8>) -> Self {
        self.ca_pem = Some(ca_pem);
        self
    }
}

/// The most server URLs one configuration may name.
pub const MAX_SERVER_URLS: usize = 8;

/// The server URLs that `list` names: one URL, or several separated by
/// commas (spaces around them are ignored), each `http://` or `https://`
/// with a host and nothing after the port, none twice, at most
/// [`MAX_SERVER_URLS`]. A list that breaks a rule is refused with what is
/// wrong, so a mistyped list is never half used.
pub fn server_urls(list: &str) -> Result<Vec<String>, Error> {
    let refuse = |why: String| {
        Error::InvalidArgument(format!(
            "server URL list {list:?}: {why} (give one URL, or several separated by commas: \
             https://host1:port,https://host2:port)"
        ))
    };
    let mut urls: Vec<String> = Vec::new();
    for (n, part) in list.split(',').enumerate() {
        let url = part.trim();
        if url.is_empty() {
            return Err(refuse(format!("URL {} is empty", n + 1)));
        }
        let uri: tonic::codegen::http::Uri = url
            .parse()
            .map_err(|e| refuse(format!("{url:?} is not a URL: {e}")))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) {
            return Err(refuse(format!("{url:?} is not http:// or https://")));
        }
        if uri.host().is_none_or(str::is_empty) {
            return Err(refuse(format!("{url:?} has no host")));
        }
        if uri
            .path_and_query()
            .is_some_and(|p| p.as_str() != "/" && !p.as_str().is_empty())
        {
            return Err(refuse(format!(
                "{url:?} has a path; a server URL ends at its port"
            )));
        }
        if urls.iter().any(|u| u == url) {
            return Err(refuse(format!("{url:?} is named twice")));
        }
        urls.push(url.to_owned());
    }
    if urls.len() > MAX_SERVER_URLS {
        return Err(refuse(format!(
            "{} URLs, more than {MAX_SERVER_URLS}",
            urls.len()
        )));
    }
    Ok(urls)
}

/// Whether `host` (from a URL) is a loopback name or address.
pub fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The endpoint a configuration names, with TLS set up; plaintext
/// `http://` is refused unless the host is a loopback address.
/// With several URLs, each is checked and the first one's endpoint is
/// returned ([`crate::blocking::Connection`] makes one per URL).
pub fn endpoint(config: &ClientConfig) -> Result<Endpoint, Error> {
    let urls = server_urls(&config.url)?;
    let mut first = None;
    for url in &urls {
        let e = endpoint_of(config, url)?;
        first.get_or_insert(e);
    }
    first.ok_or_else(|| Error::InvalidArgument("no server URL".into()))
}

fn endpoint_of(config: &ClientConfig, url: &str) -> Result<Endpoint, Error> {
    let endpoint = Endpoint::from_shared(url.to_owned())
        .map_err(|e| Error::InvalidArgument(format!("server URL {:?}: {e}", url)))?;
    let uri = endpoint.uri().clone();
    let host = uri
        .host()
        .ok_or_else(|| Error::InvalidArgument(format!("server URL {:?} has no host", url)))?
        .to_owned();
    let endpoint = endpoint
        .connect_timeout(config.connect_timeout)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_while_idle(false);
    match uri.scheme_str() {
        Some("https") => {
            let mut tls = ClientTlsConfig::new()
                .domain_name(host.trim_start_matches('[').trim_end_matches(']'));
            tls = match &config.ca_pem {
                Some(ca) => tls.ca_certificate(Certificate::from_pem(ca)),
                None => tls.with_webpki_roots(),
            };
            endpoint
                .tls_config(tls)
                .map_err(|e| Error::InvalidArgument(format!("TLS: {e}")))
        }
        Some("http") if is_loopback_host(&host) => Ok(endpoint),
        Some("http") => Err(Error::InvalidArgument(format!(
            "plaintext http:// is allowed only to a loopback address, not {host:?}; use https://"
        ))),
        _ => Err(Error::InvalidArgument(format!(
            "server URL {:?} must start with https:// (or http:// for a loopback server)",
            url
        ))),
    }
}

fn unreachable_status(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Status {
    let e: Box<dyn std::error::Error + Send + Sync> = e.into();
    Status::unavailable(format!("cannot reach the server: {}", chain(&*e)))
}

/// One line for a transport error and its causes (without tonic's bare
/// "transport error" in front).
fn chain(e: &dyn std::error::Error) -> String {
    match e.source() {
        Some(cause) if e.to_string() == "transport error" => sesame_core::error::chain(cause),
        _ => sesame_core::error::chain(e),
    }
}

/// The async client of `sesame.v1.Sesame`; cheap to clone (clones share
/// the connection).
#[derive(Clone, Debug)]
pub struct SesameClient {
    grpc: Grpc<Channel>,
    auth: Option<MetadataValue<Ascii>>,
    timeout: Duration,
}

/// Sends and receives messages that are already encoded: for tests that
/// send malformed bodies.
#[derive(Clone, Copy, Debug, Default)]
pub struct RawCodec;

/// Encoder of [`RawCodec`].
#[derive(Clone, Copy, Debug, Default)]
pub struct RawEncoder;

/// Decoder of [`RawCodec`].
#[derive(Clone, Copy, Debug, Default)]
pub struct RawDecoder;

impl Encoder for RawEncoder {
    type Item = Vec<u8>;
    type Error = Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawDecoder {
    type Item = Vec<u8>;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining()).to_vec()))
    }
}

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawEncoder;
    type Decoder = RawDecoder;
    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }
    fn decoder(&mut self) -> RawDecoder {
        RawDecoder
    }
}

fn bearer(token: &str) -> Result<MetadataValue<Ascii>, Error> {
    format!("Bearer {token}").parse().map_err(|_| {
        Error::InvalidArgument("the token holds characters not allowed in a header".into())
    })
}

impl SesameClient {
    /// Connects to the server (TLS handshake included).
    pub async fn connect(config: &ClientConfig) -> Result<Self, Error> {
        let channel = endpoint(config)?.connect().await.map_err(|e| {
            let why = chain(&e);
            let hint = if why.contains("UnknownIssuer") {
                " (its certificate is not signed by a CA this client trusts: give the client \
                 the server's CA certificate)"
            } else {
                ""
            };
            Error::Transport(format!(
                "cannot reach the server at {}: {why}{hint}",
                config.url
            ))
        })?;
        Self::over(channel, config)
    }

    /// A client over a channel that connects on first use.
    pub fn lazy(config: &ClientConfig) -> Result<Self, Error> {
        Self::over(endpoint(config)?.connect_lazy(), config)
    }

    fn over(channel: Channel, config: &ClientConfig) -> Result<Self, Error> {
        let grpc = Grpc::new(channel)
            .max_decoding_message_size(config.max_message_bytes)
            .max_encoding_message_size(config.max_message_bytes);
        Ok(SesameClient {
            grpc,
            auth: Some(bearer(&config.token)?),
            timeout: config.timeout,
        })
    }

    /// The same connection, speaking with another token.
    pub fn with_token(&self, token: &str) -> Result<Self, Error> {
        Ok(SesameClient {
            grpc: self.grpc.clone(),
            auth: Some(bearer(token)?),
            timeout: self.timeout,
        })
    }

    /// The same connection, sending no token at all.
    pub fn anonymous(&self) -> Self {
        SesameClient {
            auth: None,
            ..self.clone()
        }
    }

    /// The same connection, with another per-request timeout.
    pub fn with_timeout(&self, timeout: Duration) -> Self {
        SesameClient {
            timeout,
            ..self.clone()
        }
    }

    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(message);
        if let Some(auth) = &self.auth {
            r.metadata_mut().insert("authorization", auth.clone());
        }
        r.set_timeout(self.timeout);
        r
    }

    async fn unary<Req, Resp>(&mut self, path: &'static str, message: Req) -> Result<Resp, Status>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        self.grpc.ready().await.map_err(unreachable_status)?;
        let request = self.request(message);
        let codec = ProstCodec::<Req, Resp>::default();
        let path = tonic::codegen::http::uri::PathAndQuery::from_static(path);
        Ok(self.grpc.unary(request, path, codec).await?.into_inner())
    }

    /// Sends an already encoded body to `path` and returns the encoded
    /// answer (for tests of hostile input).
    pub async fn raw(&mut self, path: &'static str, body: Vec<u8>) -> Result<Vec<u8>, Status> {
        self.grpc.ready().await.map_err(unreachable_status)?;
        let request = self.request(body);
        let path = tonic::codegen::http::uri::PathAndQuery::from_static(path);
        Ok(self.grpc.unary(request, path, RawCodec).await?.into_inner())
    }

    /// `Health` (needs no token).
    pub async fn health(&mut self) -> Result<proto::HealthResponse, Status> {
        self.unary(path::HEALTH, proto::HealthRequest {}).await
    }

    /// `CreateIndex`, as one request (no request id: a retry after a
    /// lost answer finds the name taken; see
    /// [`SesameClient::create_index_with_id`]).
    pub async fn create_index(
        &mut self,
        index: &str,
        scheme: &str,
        params: &str,
    ) -> Result<proto::IndexInfo, Status> {
        self.create_index_with_id(index, scheme, params, None).await
    }

    /// `CreateIndex` named by `request_id`: sent again with the same id
    /// after an answer was lost, it gets the index's info instead of
    /// `ALREADY_EXISTS`.
    pub async fn create_index_with_id(
        &mut self,
        index: &str,
        scheme: &str,
        params: &str,
        request_id: Option<[u8; 16]>,
    ) -> Result<proto::IndexInfo, Status> {
        let r = proto::CreateIndexRequest {
            index: index.into(),
            scheme: scheme.into(),
            params: params.into(),
            request_id: request_id.map(|id| id.to_vec()).unwrap_or_default(),
        };
        self.unary(path::CREATE_INDEX, r).await
    }

    /// `DropIndex`.
    pub async fn drop_index(&mut self, index: &str) -> Result<proto::DropIndexResponse, Status> {
        let r = proto::DropIndexRequest {
            index: index.into(),
        };
        self.unary(path::DROP_INDEX, r).await
    }

    /// `ListIndexes`.
    pub async fn list_indexes(&mut self) -> Result<proto::ListIndexesResponse, Status> {
        self.unary(path::LIST_INDEXES, proto::ListIndexesRequest {})
            .await
    }

    /// `Call`.
    pub async fn call(
        &mut self,
        request: proto::CallRequest,
    ) -> Result<proto::CallResponse, Status> {
        self.unary(path::CALL, request).await
    }

    /// `Upload`: sends the stream and returns the stream of answers.
    pub async fn upload(
        &mut self,
        outbound: impl tokio_stream::Stream<Item = proto::UploadRequest> + Send + 'static,
    ) -> Result<Streaming<proto::UploadResponse>, Status> {
        self.grpc.ready().await.map_err(unreachable_status)?;
        let request = self.request(outbound);
        let codec = ProstCodec::<proto::UploadRequest, proto::UploadResponse>::default();
        let path = tonic::codegen::http::uri::PathAndQuery::from_static(path::UPLOAD);
        Ok(self
            .grpc
            .streaming(request, path, codec)
            .await?
            .into_inner())
    }

    /// `PutDocuments`.
    pub async fn put_documents(
        &mut self,
        request: proto::PutDocumentsRequest,
    ) -> Result<proto::PutDocumentsResponse, Status> {
        self.unary(path::PUT_DOCUMENTS, request).await
    }

    /// `GetDocuments`.
    pub async fn get_documents(
        &mut self,
        index: &str,
        ids: Vec<u64>,
    ) -> Result<proto::GetDocumentsResponse, Status> {
        let r = proto::GetDocumentsRequest {
            index: index.into(),
            ids,
        };
        self.unary(path::GET_DOCUMENTS, r).await
    }

    /// `DeleteDocuments`.
    pub async fn delete_documents(
        &mut self,
        request: proto::DeleteDocumentsRequest,
    ) -> Result<proto::DeleteDocumentsResponse, Status> {
        self.unary(path::DELETE_DOCUMENTS, request).await
    }

    /// `ListDocuments`.
    pub async fn list_documents(
        &mut self,
        index: &str,
    ) -> Result<proto::ListDocumentsResponse, Status> {
        let r = proto::ListDocumentsRequest {
            index: index.into(),
        };
        self.unary(path::LIST_DOCUMENTS, r).await
    }

    /// `DropGenerations`: every generation of `index` but `keep`, or,
    /// with `only_older`, those older than `keep` only.
    pub async fn drop_generations(
        &mut self,
        index: &str,
        keep: u64,
        only_older: bool,
    ) -> Result<proto::DropGenerationsResponse, Status> {
        let r = proto::DropGenerationsRequest {
            index: index.into(),
            keep,
            only_older,
        };
        self.unary(path::DROP_GENERATIONS, r).await
    }

    /// `CompactIndex`: one bounded run of the merge of generation
    /// `generation`'s deltas into their chunks.
    pub async fn compact_index(
        &mut self,
        index: &str,
        generation: u64,
    ) -> Result<proto::CompactIndexResponse, Status> {
        let r = proto::CompactIndexRequest {
            index: index.into(),
            generation,
        };
        self.unary(path::COMPACT_INDEX, r).await
    }

    /// `ReadRecords`.
    pub async fn read_records(
        &mut self,
        request: proto::ReadRecordsRequest,
    ) -> Result<proto::ReadRecordsResponse, Status> {
        self.unary(path::READ_RECORDS, request).await
    }

    /// `WriteRecords`.
    pub async fn write_records(
        &mut self,
        request: proto::WriteRecordsRequest,
    ) -> Result<proto::WriteRecordsResponse, Status> {
        self.unary(path::WRITE_RECORDS, request).await
    }

    /// `Stats`.
    pub async fn stats(&mut self) -> Result<proto::StatsResponse, Status> {
        self.unary(path::STATS, proto::StatsRequest {}).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_url_lists_are_parsed_or_refused_whole() {
        assert_eq!(
            server_urls("https://a:7443").unwrap(),
            vec!["https://a:7443".to_owned()]
        );
        assert_eq!(
            server_urls("https://a:7443/, http://127.0.0.1:1 ,https://[::1]:2").unwrap(),
            vec!["https://a:7443/", "http://127.0.0.1:1", "https://[::1]:2"]
        );
        for (bad, says) in [
            ("", "URL 1 is empty"),
            ("https://a:1,", "URL 2 is empty"),
            ("https://a:1,,https://b:1", "URL 2 is empty"),
            ("https://a:1,ftp://b:1", "not http:// or https://"),
            ("https://a:1,b:1", "not http:// or https://"),
            ("https://a:1,https://a:1", "named twice"),
            ("https://a:1/x", "has a path"),
        ] {
            let e = server_urls(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
        let nine: Vec<String> = (1..=9).map(|p| format!("https://a:{p}")).collect();
        assert!(server_urls(&nine.join(","))
            .unwrap_err()
            .to_string()
            .contains("more than 8"));
    }
}
