/** A part of a multipart form: a text field, or a file (several files under one name as an array). */
export type FormPart = string | FormFile | FormFile[];

export interface FormFile {
  bytes: Buffer;
  filename: string;
  type?: string;
}

/** A multipart/form-data body as a browser or an SDK sends it (encoded by the platform's FormData). */
export async function formBody(parts: Record<string, FormPart>): Promise<{ body: Buffer; contentType: string }> {
  const form = new FormData();
  for (const [name, value] of Object.entries(parts)) {
    if (typeof value === 'string') form.append(name, value);
    else for (const file of Array.isArray(value) ? value : [value]) form.append(name, new Blob([file.bytes], { type: file.type ?? 'application/octet-stream' }), file.filename);
  }
  const request = new Request('http://localhost/', { method: 'POST', body: form });
  return { body: Buffer.from(await request.arrayBuffer()), contentType: request.headers.get('content-type')! };
}
