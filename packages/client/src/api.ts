import { ApiError } from './errors.ts';

/** The API's base path on the server (contract §0). */
export const API_BASE = '/api/v1/api-channel';

/** openapi-fetch's answer as data, or its problem as an ApiError. */
export async function unwrap<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const { data, error, response } = await call;
  if (!response.ok || data === undefined) throw await ApiError.from(response, error);
  return data;
}
