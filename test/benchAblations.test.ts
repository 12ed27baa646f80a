import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ABLATIONS } from '../bench/ablations.js';

// bench/ablate.ts measures what each part of a request costs by building src/ with exact
// replacements; a refactor that moves the code a replacement finds would only fail the next
// measurement (a change of src/http/serializers.ts once broke one unnoticed). Each must match
// exactly once.
const ROOT = path.resolve(import.meta.dirname, '..');

describe('bench/ablations.ts', () => {
  const replacements = ABLATIONS.flatMap((ablation) =>
    (ablation.replacements ?? []).map((replacement) => ({ ablation: ablation.name, ...replacement })),
  );

  it('has source replacements to check', () => {
    expect(replacements.length).toBeGreaterThan(10);
  });

  it.each(replacements.map((r) => [`${r.ablation}: ${r.file}`, r] as const))('%s finds its text exactly once', (_, replacement) => {
    const text = readFileSync(path.join(ROOT, replacement.file), 'utf8');
    expect(text.split(replacement.find).length - 1).toBe(1);
  });
});
