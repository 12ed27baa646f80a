import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/load.js';
import { openS3Client } from '../src/infra/blobs/s3Client.js';
import { LocalS3 } from './helpers/localS3.js';

/**
 * With no S3_ACCESS_KEY_ID the AWS SDK's default chain finds the credentials, as with an instance
 * role or workload identity: here its first link, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in
 * the environment, against s3rver (which checks the signature).
 */
describe('S3 with the credentials of the environment', () => {
  let s3: LocalS3;
  let env: Record<string, string>;
  const saved = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY };

  beforeAll(async () => {
    s3 = await LocalS3.start();
    const bucket = await s3.newBucket();
    env = { ...bucket.env, SECRET_KEY: 'x'.repeat(32) };
    delete env.S3_ACCESS_KEY_ID;
    delete env.S3_SECRET_ACCESS_KEY;
    delete env.S3_FORCE_PATH_STYLE;
  });
  afterAll(async () => {
    process.env.AWS_ACCESS_KEY_ID = saved.id;
    process.env.AWS_SECRET_ACCESS_KEY = saved.secret;
    if (saved.id === undefined) delete process.env.AWS_ACCESS_KEY_ID;
    if (saved.secret === undefined) delete process.env.AWS_SECRET_ACCESS_KEY;
    await s3?.close();
  });

  function client(id: string, secret = 'S3RVER') {
    process.env.AWS_ACCESS_KEY_ID = id;
    process.env.AWS_SECRET_ACCESS_KEY = secret;
    const config = loadConfig(env, { createSecret: false });
    expect(config.s3!.credentials).toBeNull();
    return { client: openS3Client(config.s3!), bucket: config.s3!.bucket };
  }

  it('signs with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY when no S3_ACCESS_KEY_ID is set', async () => {
    const { client: s3Client, bucket } = client('S3RVER');
    await s3Client.send(new PutObjectCommand({ Bucket: bucket, Key: 'env/object', Body: 'from the environment' }));
    const got = await s3Client.send(new GetObjectCommand({ Bucket: bucket, Key: 'env/object' }));
    expect(await got.Body!.transformToString()).toBe('from the environment');
  });

  it('is refused with another access key in the environment: the environment is what signs', async () => {
    const { client: s3Client, bucket } = client('NOT-S3RVER');
    await expect(s3Client.send(new PutObjectCommand({ Bucket: bucket, Key: 'env/wrong', Body: 'x' }))).rejects.toThrow(/access key/i);
  });

  it('addresses AWS virtual-hosted and any other endpoint path style, unless S3_FORCE_PATH_STYLE says otherwise', () => {
    const base = { SECRET_KEY: 'x'.repeat(32), BLOB_STORE: 's3', S3_BUCKET: 'orgdata-files' };
    expect(loadConfig(base, { createSecret: false }).s3!.forcePathStyle).toBe(false);
    expect(loadConfig({ ...base, S3_ENDPOINT: 'https://s3.eu-west-1.amazonaws.com' }, { createSecret: false }).s3!.forcePathStyle).toBe(
      false,
    );
    expect(loadConfig({ ...base, S3_ENDPOINT: 'http://minio:9000' }, { createSecret: false }).s3!.forcePathStyle).toBe(true);
    expect(
      loadConfig({ ...base, S3_ENDPOINT: 'http://minio:9000', S3_FORCE_PATH_STYLE: 'false' }, { createSecret: false }).s3!.forcePathStyle,
    ).toBe(false);
  });
});
