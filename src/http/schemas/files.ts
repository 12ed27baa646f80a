import { Type } from 'typebox';
import { FILE_NAME_MAX } from '../../domain/files/files.js';
import { Cursor, Deleted, IdParam, Limit, ListOf, named, Nullable, Timestamp } from './common.js';

const fileFields = {
  object: Type.Literal('file'),
  id: Type.String({ examples: ['file_0VbYgDVox8nJlPak0oIz'] }),
  name: Type.String({ minLength: 1, maxLength: FILE_NAME_MAX, examples: ['report.pdf'] }),
  content_type: Type.String({ maxLength: 255, examples: ['application/pdf'] }),
  size: Type.Integer({ minimum: 0, description: 'Bytes.' }),
  status: Type.String({ enum: ['pending', 'ready'], description: '`pending` until the bytes are uploaded, then `ready`.' }),
  sha256: Nullable(Type.String({ description: 'Hex SHA-256 of the bytes; null until uploaded.' })),
  created_at: Timestamp,
  updated_at: Timestamp,
  uploaded_at: Nullable(Timestamp),
};

export const File = named('File', Type.Object(fileFields, { additionalProperties: false }));

export const FileReservation = named(
  'FileReservation',
  Type.Object(
    {
      ...fileFields,
      upload_url: Type.String({ format: 'uri', description: 'PUT the raw bytes here, with no API key, before `upload_expires_at`.' }),
      upload_expires_at: Timestamp,
    },
    { additionalProperties: false, description: 'A pending file and where to upload its bytes.' },
  ),
);

export const FileCreate = named(
  'FileCreate',
  Type.Object(
    {
      name: Type.String({ minLength: 1, maxLength: FILE_NAME_MAX, description: 'Shown to people and used for downloads.' }),
      content_type: Type.String({ minLength: 3, maxLength: 255, description: 'Media type, sent back on download.' }),
      size: Type.Integer({
        minimum: 0,
        description: "Exact size in bytes; at most the server's MAX_FILE_BYTES (the served document states it as `maximum`).",
      }),
    },
    { additionalProperties: false, examples: [{ name: 'report.pdf', content_type: 'application/pdf', size: 48213 }] },
  ),
);

export const FileDownload = named(
  'FileDownload',
  Type.Object(
    {
      object: Type.Literal('file_download'),
      file_id: Type.String(),
      url: Type.String({ format: 'uri', description: 'GET the bytes here, with no API key, before `expires_at`.' }),
      expires_at: Timestamp,
    },
    { additionalProperties: false },
  ),
);

export const FileList = named('FileList', ListOf(File, 'A page of files, oldest first.'));
export const FileDeleted = named('FileDeleted', Deleted('file'));
export const FileListQuery = Type.Object(
  {
    limit: Type.Optional(Limit),
    cursor: Type.Optional(Cursor),
    status: Type.Optional(Type.String({ enum: ['pending', 'ready'], description: 'Only files in this state.' })),
  },
  { additionalProperties: false },
);
export const FileParams = Type.Object({ id: IdParam('file', 'file') }, { additionalProperties: false });
export const LinkParams = Type.Object(
  { token: Type.String({ minLength: 1, maxLength: 1024, description: 'The signed token of a link the API returned.' }) },
  { additionalProperties: false },
);
