"""A certificate authority made for one replay or test, and a server certificate for some names signed by it:
what a stand-in for one of Google's APIs shows the client code that dials the real name (its trust given by
the CA file: GRPC_DEFAULT_SSL_ROOTS_FILE_PATH for gRPC, CURL_CA_BUNDLE for TensorFlow's GCS filesystem)."""

from __future__ import annotations

import datetime
from pathlib import Path


def issued(folder: Path, names: tuple[str, ...], stem: str) -> tuple[str, str, str]:
    """(CA file, certificate file, key file), PEM, written into ``folder`` as ca.pem, STEM.pem, STEM.key;
    the certificate names ``names`` (its subject the first), valid from an hour ago for a day."""
    from cryptography import x509  # only a replay or test that serves TLS needs it
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tfxd replay CA")])

    def valid(builder: x509.CertificateBuilder) -> x509.CertificateBuilder:
        return (builder.serial_number(x509.random_serial_number()).issuer_name(ca_name)
                .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1)))

    ca = (valid(x509.CertificateBuilder()).subject_name(ca_name).public_key(ca_key.public_key())
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True).sign(ca_key, hashes.SHA256()))
    cert = (valid(x509.CertificateBuilder()).subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .public_key(key.public_key())
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = folder / "ca.pem", folder / f"{stem}.pem", folder / f"{stem}.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(paths[0]), str(paths[1]), str(paths[2])
