import { expect } from 'chai';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { generate } from '../../scripts/gen-schema-types.ts';

describe('TypeScript types derived from the JSON Schemas', () => {
  it('schemas/types.gen.ts is what the generator writes from the current schemas (run npm run gen:types)', async function () {
    this.timeout(30_000);
    const committed = await readFile(path.resolve(import.meta.dirname, '../../schemas/types.gen.ts'), 'utf8');
    expect(committed).to.equal(await generate());
    expect(committed).to.include('export interface TenantConfig');
    expect(committed).to.include('export interface Step');
  });
});
