import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/load.js';
import { SECRET_SETTINGS } from '../src/config/secrets.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');
const DOCS = readdirSync(path.join(ROOT, 'docs'))
  .filter((name) => name.endsWith('.md'))
  .map((name) => `docs/${name}`);
const PAGES = ['README.md', ...DOCS];

/** Markdown outside fenced code blocks (a `#` comment in a shell block is no heading, a link there no link). */
function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, '');
}

/** GitHub's anchors for a page's headings: lower case, punctuation but `-` and `_` dropped, spaces to `-`, repeats numbered. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const [, heading] of prose(markdown).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const text = heading!.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/<[^>]+>/g, '');
    const slug = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return out;
}

/** Every link and image target of a page, but for other sites and mail. */
function relativeLinks(markdown: string): string[] {
  const text = prose(markdown).replace(/`[^`\n]*`/g, '');
  return [...text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => m[1]!).filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target));
}

describe('the README and docs/', () => {
  it('keep the README a front door: at most 250 lines, linking every page of docs/', () => {
    const readme = read('README.md');
    expect(readme.split('\n').length).toBeLessThanOrEqual(250);
    const linked = new Set(relativeLinks(readme).map((target) => target.split('#')[0]));
    for (const doc of DOCS) expect(linked, `README.md links ${doc}`).toContain(doc);
  });

  it('link only to files that exist and, for file.md#anchor, to a heading that exists', () => {
    const broken: string[] = [];
    for (const page of PAGES) {
      for (const target of relativeLinks(read(page))) {
        const [file, anchor] = target.split('#') as [string, string | undefined];
        const resolved = file ? path.join(path.dirname(path.join(ROOT, page)), decodeURI(file)) : path.join(ROOT, page);
        if (!resolved.startsWith(ROOT) || !existsSync(resolved)) {
          broken.push(`${page}: ${target} (no such file)`);
          continue;
        }
        if (anchor !== undefined && (!resolved.endsWith('.md') || !anchors(readFileSync(resolved, 'utf8')).has(anchor))) {
          broken.push(`${page}: ${target} (no such heading)`);
        }
      }
    }
    expect(broken).toEqual([]);
  });

  it("derive anchors by GitHub's rules", () => {
    const slugs = anchors(
      "# Find a request by its `request_id`\n## Export an organisation's data\n## Stop it\n### Stop it\n```sh\n# not a heading\n```\n",
    );
    expect([...slugs]).toEqual(['find-a-request-by-its-request_id', 'export-an-organisations-data', 'stop-it', 'stop-it-1']);
  });

  describe('docs/configuration.md', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'orgdata-docs-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    /** The variables the loader names in its source: `env.NAME`, or a helper called with `(env, 'NAME'`. */
    const inSource = () => {
      const names = new Set<string>();
      for (const file of ['src/config/load.ts', 'src/config.ts']) {
        const source = read(file);
        for (const [, name] of source.matchAll(/\benv\.([A-Z][A-Z0-9_]+)/g)) names.add(name!);
        for (const [, name] of source.matchAll(/\(env, '([A-Z][A-Z0-9_]+)'/g)) names.add(name!);
      }
      // The file form of each secret setting (`NAME_FILE`, read by withSecretFiles).
      for (const name of SECRET_SETTINGS) names.add(`${name}_FILE`);
      return names;
    };

    /** The variables loadConfig really reads, on the local and the S3 paths. */
    const readAtRun = () => {
      const names = new Set<string>();
      const recorded = (values: Record<string, string>) =>
        new Proxy(values, {
          get(target, key) {
            if (typeof key === 'string') names.add(key);
            return target[key as string];
          },
        });
      loadConfig(recorded({ DATA_DIR: dir, SECRET_KEY: 'x'.repeat(40) }));
      loadConfig(
        recorded({
          DATA_DIR: dir,
          SECRET_KEY: 'x'.repeat(40),
          BLOB_STORE: 's3',
          S3_BUCKET: 'orgdata-docs',
          S3_ENDPOINT: 'http://127.0.0.1:9',
        }),
      );
      return names;
    };

    it('names every environment variable the config loader reads', () => {
      const source = inSource();
      // The source scan misses no read the loader really makes (else a new kind of read would go unchecked).
      for (const name of readAtRun()) expect(source, `loadConfig reads ${name}`).toContain(name);
      expect(source.size).toBeGreaterThan(40);
      const doc = read('docs/configuration.md');
      const missing = [...source].filter((name) => !doc.includes(`\`${name}\``));
      expect(missing).toEqual([]);
    });
  });

  it("docs/operations.md names every command of the operator CLI's usage", () => {
    const cli = read('src/cli.ts');
    const usage = /const USAGE = `([\s\S]*?)`;/.exec(cli)![1]!;
    // A command line of the usage: `orgdata` and the words before the first option or argument.
    const commands = [...usage.matchAll(/^ {2}(orgdata(?: [a-z][a-z|-]*)+|orgdata --version)/gm)].map((m) => m[1]!);
    expect(commands).toContain('orgdata users set-password');
    expect(commands).toContain('orgdata webhooks delete|enable|disable');
    expect(commands.length).toBeGreaterThan(25);
    const doc = read('docs/operations.md').replaceAll('\\|', '|');
    const missing = commands.filter((command) => !doc.includes(`\`${command}`));
    expect(missing).toEqual([]);
  });
});
