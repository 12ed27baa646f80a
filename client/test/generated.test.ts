import { readFileSync } from 'node:fs';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { GENERATED_TYPES, generateTypes } from '../scripts/generate.js';
import {
  API_ERROR_CODES,
  VERSION,
  type components,
  type Contact,
  type Event,
  type File,
  type Group,
  type Label,
  type Page,
} from '../src/index.js';

describe('types generated from openapi.json', () => {
  it('src/generated/openapi.ts is what openapi-typescript makes of the committed document (run `npm run -w client generate`)', async () => {
    const committed = readFileSync(GENERATED_TYPES, 'utf8');
    expect(committed === (await generateTypes()), 'client/src/generated/openapi.ts is out of date: run npm run -w client generate').toBe(
      true,
    );
  }, 60_000);

  it('the error code union is the list the server sends', async () => {
    // The server's own list, loaded at run time so that the client's program does not compile server code.
    const serverCodes = new URL('../../src/http/errorCodes.ts', import.meta.url).href;
    const { ERROR_CODES } = (await import(serverCodes)) as { ERROR_CODES: Record<string, unknown> };
    expect([...API_ERROR_CODES].sort()).toEqual(Object.keys(ERROR_CODES).sort());
  });

  it('resource types are the schemas, and every list envelope is a Page', () => {
    type Schemas = components['schemas'];
    expectTypeOf<Contact>().toEqualTypeOf<Schemas['Contact']>();
    expectTypeOf<Label>().toEqualTypeOf<Schemas['Label']>();
    expectTypeOf<Group>().toEqualTypeOf<Schemas['Group']>();
    expectTypeOf<File>().toEqualTypeOf<Schemas['File']>();
    expectTypeOf<Event>().toEqualTypeOf<Schemas['Event']>();
    expectTypeOf<Page<Contact>>().toEqualTypeOf<Schemas['ContactList']>();
    expectTypeOf<Page<Label>>().toEqualTypeOf<Schemas['LabelList']>();
    expectTypeOf<Page<Group>>().toEqualTypeOf<Schemas['GroupList']>();
    expectTypeOf<Page<Schemas['GroupMember']>>().toEqualTypeOf<Schemas['GroupMemberList']>();
    expectTypeOf<Page<File>>().toEqualTypeOf<Schemas['FileList']>();
    expectTypeOf<Page<Event>>().toEqualTypeOf<Schemas['EventList']>();
  });

  it('VERSION is the package version', () => {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(VERSION).toBe(pkg.version);
  });
});
