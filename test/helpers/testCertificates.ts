import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** A CA of a test's own, made with openssl: PEM files in a temporary directory. */
export interface TestCa {
  dir: string;
  cert: string;
  key: string;
}

const run = (args: string[]) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });

/** A new CA (P-256, valid 2 days) in a directory of its own. */
export function makeCa(name: string): TestCa {
  const dir = mkdtempSync(path.join(tmpdir(), `orgdata-ca-${name}-`));
  const cert = path.join(dir, 'ca.crt');
  const key = path.join(dir, 'ca.key');
  // prettier-ignore
  run(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', cert,
    '-days', '2', '-subj', `/CN=orgdata test CA ${name}`,
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  return { dir, cert, key };
}

/**
 * A server certificate signed by `ca` for `names` (subjectAltName entries such as `DNS:localhost`
 * or `IP:127.0.0.1`); its files in `ca.dir`, named after `file`.
 */
export function makeServerCertificate(ca: TestCa, file: string, names: string[]): { cert: string; key: string } {
  const cert = path.join(ca.dir, `${file}.crt`);
  const key = path.join(ca.dir, `${file}.key`);
  const csr = path.join(ca.dir, `${file}.csr`);
  const ext = path.join(ca.dir, `${file}.ext`);
  writeFileSync(ext, `subjectAltName=${names.join(',')}\nextendedKeyUsage=serverAuth\n`);
  // prettier-ignore
  run(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', csr, '-subj', `/CN=${file}`]);
  // prettier-ignore
  run(['x509', '-req', '-in', csr, '-CA', ca.cert, '-CAkey', ca.key, '-CAcreateserial', '-out', cert, '-days', '2', '-extfile', ext]);
  return { cert, key };
}
