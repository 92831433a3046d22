/** Server-sent events with backpressure: the kernel's writer (core/http/sse-response.ts), shared with followed operations. */
export { SseResponse } from '../../core/http/sse-response.ts';
