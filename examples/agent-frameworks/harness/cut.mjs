// A loopback proxy in front of oncebox's /mcp that cuts the connection of one tool call
// after oncebox has answered it: the call was recorded, the client never hears so. What
// happens next is the framework's (Mastra's MCP client reconnects and sends it again) or the
// model's (it calls again after the error).
import { createServer } from "node:http";

export async function cutProxy(upstream, shouldCut) {
  let cuts = 0;
  const server = createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks);
    const headers = { ...req.headers };
    delete headers.host;
    delete headers["content-length"];
    delete headers.connection;
    const ac = new AbortController();
    req.socket.once("close", () => ac.abort());
    let up;
    try {
      up = await fetch(new URL(req.url, upstream), {
        method: req.method,
        headers,
        body: ["GET", "HEAD", "DELETE"].includes(req.method) ? undefined : body,
        signal: ac.signal,
      });
    } catch {
      res.destroy();
      return;
    }
    if (cuts === 0 && req.method === "POST" && shouldCut(body.toString())) {
      cuts++;
      await up.arrayBuffer().catch(() => {}); // oncebox has answered: the op is recorded
      req.socket.destroy();
      return;
    }
    const out = {};
    up.headers.forEach((v, k) => {
      if (!["content-length", "content-encoding", "transfer-encoding", "connection"].includes(k)) out[k] = v;
    });
    res.writeHead(up.status, out);
    if (!up.body) return res.end();
    try {
      for await (const c of up.body) res.write(c);
    } catch {
      // the client or oncebox went away
    }
    res.end();
  });
  await new Promise((done) => server.listen(0, "127.0.0.1", done));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    cuts: () => cuts,
    close: () => new Promise((done) => { server.closeAllConnections(); server.close(done); }),
  };
}
