import { EmbeddedMessageLog } from '../src/message-log/embedded-message-log.js';
import { messageLogContract } from './support/message-log-contract.js';

messageLogContract('embedded (in process)', async () => new EmbeddedMessageLog());
